@testable import Braid
import Dispatch
import Foundation
import Testing

/// A DTLS message is one record in one datagram of `maximumDatagramSize`: the largest message
/// goes through whole, one byte more is refused with a typed error naming both sizes, and the
/// connection goes on. The figures are the README's.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DTLSMessageSizeTests {
    private func echoListener(maximumDatagramSize: Int) async throws -> (NetworkListener<DTLS>, Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).maximumDatagramSize(maximumDatagramSize).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                for try await (content, _) in connection.messages { try await connection.send(content) }
            }
        }
        try await listener.waitUntilReady()
        return (listener, task)
    }

    /// DTLS 1.2's record header (13 bytes) and the negotiated AEAD's explicit nonce and tag:
    /// AES-GCM 8 + 16, ChaCha20-Poly1305 0 + 16.
    private static func documentedMaximums(for datagramSize: Int) -> Set<Int> {
        [datagramSize - 13 - 8 - 16, datagramSize - 13 - 16]
    }

    @Test(arguments: [1200, 600])
    func theLargestMessageFitsAndOneByteMoreIsRefused(_ datagramSize: Int) async throws {
        let (listener, task) = try await echoListener(maximumDatagramSize: datagramSize)
        defer { task.cancel() }
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").maximumDatagramSize(datagramSize)
                .trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        try await connection.send(Data("hello".utf8))
        #expect(try await connection.receive().content == Data("hello".utf8))
        var maximum = 0
        do {
            try await connection.send(Data(count: datagramSize))
            Issue.record("a \(datagramSize)-byte message fit a \(datagramSize)-byte datagram")
        } catch NetworkError.datagramTooLarge(let size, let reported) {
            #expect(size == datagramSize)
            maximum = reported
        }
        #expect(Self.documentedMaximums(for: datagramSize).contains(maximum), "maximum \(maximum)")
        let largest = Data((0..<maximum).map { UInt8(truncatingIfNeeded: $0) })
        try await connection.send(largest)
        #expect(try await connection.receive().content == largest)
        await #expect(throws: NetworkError.datagramTooLarge(size: maximum + 1, maximum: maximum)) {
            try await connection.send(Data(count: maximum + 1))
        }
        try await connection.send(Data("still there".utf8))
        #expect(try await connection.receive().content == Data("still there".utf8))
    }

    /// The classic API reports an oversize message as EMSGSIZE, and the connection goes on.
    @Test func aClassicSendTooLargeFailsWithEMSGSIZE() async throws {
        let (listener, task) = try await echoListener(maximumDatagramSize: 1200)
        defer { task.cancel() }
        let options = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "echo")
        sec_protocol_options_set_tls_server_name(options.securityProtocolOptions, "localhost")
        options.securityProtocolOptions.update { $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile) }
        let connection = NWConnection(host: "127.0.0.1", port: listener.port!, using: NWParameters(dtls: options))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data(count: 1200)) == .posix(.EMSGSIZE))
        #expect(await connection.sendAsync(Data("after".utf8)) == nil)
        #expect(await connection.receiveMessageAsync().content == Data("after".utf8))
    }
}
