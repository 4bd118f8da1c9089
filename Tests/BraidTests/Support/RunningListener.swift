import Braid
import Foundation

/// The echo application through the public API: streams echoed with end-of-stream mirrored,
/// datagrams echoed.
func echo(_ connection: NetworkConnection<QUIC>) async throws {
    try await withThrowingDiscardingTaskGroup { group in
        group.addTask {
            for await datagram in connection.datagrams { try await connection.datagrams.send(datagram) }
        }
        try await connection.inboundStreams { stream in
            while true {
                let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 65536)
                try await stream.send(content, endOfStream: metadata.isEndOfStream)
                if metadata.isEndOfStream { return }
            }
        }
    }
}

/// A listener on 127.0.0.1 with a system-chosen port, running `handler` in a task.
struct RunningListener {
    let listener: NetworkListener<QUIC>
    let task: Task<Void, any Error>
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: listener.port!) }

    static func start(
        alpn: [String] = ["echo"], configure: (QUIC) -> QUIC = { $0 }, connectionLimit: Int? = nil,
        handler: @escaping @Sendable (NetworkConnection<QUIC>) async throws -> Void = echo
    ) async throws -> RunningListener {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            configure(testServer(alpn: alpn))
        }
        if let connectionLimit { listener.newConnectionLimit = connectionLimit }
        let task = Task { try await listener.run(handler) }
        try await listener.waitUntilReady()
        return RunningListener(listener: listener, task: task)
    }
}

/// A server application that accepts streams and never reads them.
@Sendable func readNothing(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.inboundStreams { _ in try await Task.sleep(for: .seconds(60)) }
}

/// Opens `count` streams at once on `connection`, sends each a distinct payload (1,000 bytes
/// plus 97 per index) with its end, and reads the echo back; returns how many came back intact.
func echoOnConcurrentStreams(_ connection: NetworkConnection<QUIC>, count: Int) async throws -> Int {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        for index in 0..<count {
            group.addTask {
                let payload = Data((0..<(1000 + index * 97)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
                let stream = try await connection.openStream()
                try await stream.send(payload, endOfStream: true)
                var echoed = Data()
                while true {
                    let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 65536)
                    echoed += content
                    if metadata.isEndOfStream { break }
                }
                return echoed == payload
            }
        }
        return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
}
