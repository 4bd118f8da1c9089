import ArgumentParser
import Braid
import Foundation
import Synchronization

/// `braid connect`: reaches a DNS-SD service by name over TCP, sends a line, prints the reply.
struct Connect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Connect to a DNS-SD service by name over TCP, send text and print what comes back.",
        discussion: """
            Resolves the .service endpoint (name, type, local.) as NWConnection does, sends --send \
            and the end of the stream, reads until the server ends it, and prints one JSON line: \
            {"received": text}, with "remote": address when the connection's path names it. Exit status 1 if the connection fails or \
            --timeout seconds pass. BRAID_DISCOVERY_BACKEND chooses avahi-daemon or Braid's own \
            multicast DNS.
            """)

    @Argument(help: "The service's name.") var name: String
    @Argument(help: "The service type, like _echo._tcp.") var type: String
    @Option(help: "The text to send.") var send = "hello"
    @Option(help: "Give up after this many seconds.") var timeout = 30.0

    func run() async throws {
        let connection = NWConnection(to: .service(name: name, type: type, domain: "local.", interface: nil), using: .tcp)
        let text = send
        let (outcome, finish) = AsyncStream<Result<[String: String], CommandFailure>>.makeStream()
        let received = ReceivedBytes()
        @Sendable func read() {
            connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, error in
                if let error {
                    finish.yield(.failure(CommandFailure("receiving: \(error)")))
                    return
                }
                if let content { received.bytes.withLock { $0.append(content) } }
                guard isComplete else {
                    read()
                    return
                }
                var line: [String: String] = ["received": String(decoding: received.bytes.withLock { $0 }, as: UTF8.self)]
                if let remote = connection.currentPath?.remoteEndpoint { line["remote"] = "\(remote)" }
                finish.yield(.success(line))
            }
        }
        connection.stateUpdateHandler = { state in
            switch state {
            case .ready:
                connection.send(content: Data(text.utf8), contentContext: .finalMessage, isComplete: true, completion: .contentProcessed { _ in })
                read()
            case .failed(let error):
                finish.yield(.failure(CommandFailure("connecting to \(connection.endpoint): \(error)")))
            default:
                break
            }
        }
        connection.start(queue: DispatchQueue(label: "braid.connect"))
        defer { connection.cancel() }
        let result = try await withThrowingTaskGroup(of: Result<[String: String], CommandFailure>?.self) { group in
            group.addTask { await outcome.first { _ in true } }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                return .failure(CommandFailure("no reply from \(connection.endpoint) within \(timeout) s"))
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        switch result {
        case .success(let line): printJSONLine(line)
        case .failure(let failure): throw failure
        case nil: throw CommandFailure("no outcome")
        }
    }
}

/// The bytes a connection delivered so far, from its receive completions.
final class ReceivedBytes: Sendable {
    let bytes = Mutex(Data())
}
