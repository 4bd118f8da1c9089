import Foundation
import Testing

@testable import Braid
import BraidCore

/// Datagrams a DTLS connection drops itself are counted: while a client's handshake waits for
/// its verify block's verdict, what the server sends beyond `DTLS.verdictQueueLimit` is
/// dropped and shows in `droppedDatagramCount`; what was kept arrives, in order, once the
/// verdict accepts.
@Suite(.timeLimit(.minutes(3))) struct DTLSDroppedDatagramTests {
    @Test func datagramsBeyondTheVerdictQueueAreCountedDropped() async throws {
        let sent = 100
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                // Sent as soon as the server's side is ready, before the client's verdict.
                for index in 0..<sent { try await connection.send(Data("message \(index)".utf8)) }
                // Then a last one once the client asks: everything kept arrives before it.
                for try await (content, _) in connection.messages where content == Data("go".utf8) {
                    try await connection.send(Data("end".utf8))
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let (asked, answer) = AsyncStream.makeStream(of: (@Sendable (Bool) -> Void).self)
        let connection = NetworkConnection(to: .hostPort(host: "localhost", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo"]).verified(by: TLSPeerVerifier { _, decide in answer.yield(decide) })
        }
        defer { connection.cancel() }
        connection.start()
        var iterator = asked.makeAsyncIterator()
        let decide = try #require(await iterator.next())
        let atLeast = sent - DTLS.verdictQueueLimit
        let dropped = try await withDeadline(.seconds(60)) { () -> Int? in
            while true {
                let count = await connection.droppedDatagramCount
                if count >= atLeast { return count }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(dropped != nil, "fewer than \(atLeast) datagrams were counted dropped")
        decide(true)
        try await connection.send(Data("go".utf8))
        var received = 0
        while true {
            let content = try await connection.receive().content
            if content == Data("end".utf8) { break }
            #expect(content == Data("message \(received)".utf8))
            received += 1
        }
        // The engine kept at most its queue's worth (fewer when the server repeated a
        // handshake flight, whose copies took places too); every other message was counted.
        #expect(received > 0 && received <= DTLS.verdictQueueLimit)
        #expect(await connection.droppedDatagramCount >= sent - received)
    }
}
