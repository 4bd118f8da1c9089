import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// Per-message IP metadata on UDP: the ECN marks a send's content context (classic API) or
/// metadata builder (new API) asks for travel in the IP header, and the receiver reads them
/// in its context's `NWProtocolIP.Metadata` (classic) or `metadata.ecn` (new API).
@Suite(.timeLimit(.minutes(10))) struct NWConnectionMetadataTests {
    /// A classic-API server that answers each datagram with its bytes, marked with the ECN
    /// bits it arrived with, written as Network.framework's examples write it.
    @Sendable static func echoMarks(_ connection: NWConnection) {
        connection.receiveMessage { content, context, _, error in
            guard error == nil, let content else { return }
            let arrived = context?.protocolMetadata(definition: NWProtocolIP.definition) as? NWProtocolIP.Metadata
            let reply = NWProtocolIP.Metadata()
            reply.ecn = arrived?.ecn ?? .nonECT
            connection.send(
                content: content, contentContext: NWConnection.ContentContext(identifier: "echo", metadata: [reply]),
                completion: .contentProcessed { _ in })
            echoMarks(connection)
        }
    }

    /// Over loopback, where the kernel carries each datagram's TOS byte: every mark the client
    /// sets reaches the server, whose reply carries it back.
    @Test func ecnMarksTravelBothWaysOnClassicUDP() async throws {
        let server = try ClassicEchoServer(.udp, serving: Self.echoMarks)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: .udp)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        for mark in [NWProtocolIP.ECN.ect0, .ect1, .ce, .nonECT] {
            let ip = NWProtocolIP.Metadata()
            ip.ecn = mark
            let message = Data("marked \(mark)".utf8)
            #expect(await connection.sendAsync(message, context: NWConnection.ContentContext(identifier: "probe", metadata: [ip])) == nil)
            let (content, context, error) = await connection.receiveMessageWithContext()
            #expect(error == nil)
            #expect(content == message)
            let received = context?.protocolMetadata(definition: NWProtocolIP.definition) as? NWProtocolIP.Metadata
            #expect(received?.ecn == mark, "sent \(mark), the echo came back \(String(describing: received?.ecn))")
            #expect(context?.protocolMetadata(definition: NWProtocolUDP.definition) is NWProtocolUDP.Metadata)
            #expect(context?.protocolMetadata(definition: NWProtocolTLS.definition) == nil)
        }
    }

    /// Linux marks DSCP per socket: a send asking for another service class than the
    /// connection's is refused, and one asking for the connection's own goes.
    @Test func aPerMessageServiceClassOtherThanTheConnectionsIsRefused() async throws {
        let echo = try await RunningUDPEcho.start()
        defer { echo.task.cancel() }
        let connection = NWConnection(to: echo.endpoint, using: .udp)
        defer { connection.cancel() }
        connection.start(queue: DispatchQueue(label: "client"))
        let voice = NWProtocolIP.Metadata().serviceClass(.interactiveVoice)
        let refused = await connection.sendAsync(Data("voice".utf8), context: NWConnection.ContentContext(identifier: "voice", metadata: [voice]))
        #expect(refused == .posix(.EOPNOTSUPP))
        let same = NWProtocolIP.Metadata().serviceClass(.bestEffort)
        #expect(await connection.sendAsync(Data("same".utf8), context: NWConnection.ContentContext(identifier: "same", metadata: [same])) == nil)
    }

    /// The new API's `send(_:metadata:)` in memory: marked and unmarked datagrams sent in one
    /// batch keep their order, and each keeps its own mark (a GSO batch never mixes marks).
    @Test func theNewAPIsMarksTravelInOrderWithinABatch() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningUDPEcho.start { connection in
                for try await (content, metadata) in connection.messages {
                    try await connection.send(content) { NWProtocolIP.Metadata().ecn(NWProtocolIP.ECN(metadata.ecn)) }
                }
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { UDP() }
            defer { connection.cancel() }
            let marks: [NWProtocolIP.ECN] = [.nonECT, .nonECT, .ect0, .ect0, .nonECT, .ce, .ect1]
            try await connection.batch {
                for (index, mark) in marks.enumerated() {
                    try await connection.send(Data(repeating: UInt8(index), count: 100)) { NWProtocolIP.Metadata().ecn(mark) }
                }
            }
            for (index, mark) in marks.enumerated() {
                let (content, metadata) = try await connection.receive()
                #expect(content == Data(repeating: UInt8(index), count: 100))
                #expect(NWProtocolIP.ECN(metadata.ecn) == mark, "datagram \(index)")
            }
        }
    }
}
