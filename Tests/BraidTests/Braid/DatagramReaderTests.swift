import Foundation
import Testing

@testable import Braid
@testable import BraidIO
import BraidCore

/// Reading a connection's datagrams through the public API, in memory (`MemoryWorld`): what a
/// reader took but did not hand out stays for the next reader, and concurrent readers share
/// them. The first two tests read the connection's datagram inbox through internals.
@Suite struct DatagramReaderTests {
    /// A reader that stops early (a `break` out of `for await`) took a whole batch; what it
    /// did not hand out goes back to the connection for the next reader, in order.
    @Test(.timeLimit(.minutes(10))) func datagramsAnIteratorTookButDidNotReturnAreKept() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            defer { connection.cancel() }
            _ = try await connection.openStream()
            let sent = (0..<20).map { Data([UInt8($0), 1, 2, 3]) }
            for datagram in sent { try await connection.datagrams.send(datagram) }
            // All echoes queued, so the first reader's batch holds all of them.
            let queued = try await world.eventually { connection.shared.quic.datagramInbox.count >= sent.count }
            try #require(queued, "the echoes never all arrived")
            var first: Data?
            for await datagram in connection.datagrams {
                first = datagram
                break
            }
            var rest: [Data] = []
            for await datagram in connection.datagrams {
                rest.append(datagram)
                if rest.count == sent.count - 1 { break }
            }
            #expect([first] + rest == sent)
        }
    }

    /// The same over `UDP()`: a `messages` iteration hands out the datagrams it took without
    /// suspending, and one that stops early leaves the rest, in order, for the next.
    @Test(.timeLimit(.minutes(10))) func udpMessagesAnIteratorTookButDidNotReturnAreKept() async throws {
        try await MemoryWorld.run { world in
            let echo = try await RunningUDPEcho.start()
            defer { echo.task.cancel() }
            let connection = NetworkConnection(to: echo.endpoint) { UDP() }
            defer { connection.cancel() }
            let sent = (0..<20).map { Data([UInt8($0), 9, 9]) }
            for datagram in sent { try await connection.send(datagram) }
            let inbox = try #require(connection.shared.datagram).inbox
            let queued = try await world.eventually { inbox.count >= sent.count }
            try #require(queued, "the echoes never all arrived")
            var first: [Data] = []
            for try await (content, metadata) in connection.messages {
                #expect(metadata.remoteEndpoint == echo.endpoint)
                first.append(content)
                if first.count == 3 { break }
            }
            var rest: [Data] = []
            for try await (content, _) in connection.messages {
                rest.append(content)
                if rest.count == sent.count - first.count - 1 { break }
            }
            let last = try await connection.receive().content
            #expect(first + rest + [last] == sent)
        }
    }

    /// Many tasks reading one connection's datagrams at once: each datagram reaches exactly one.
    @Test(.timeLimit(.minutes(10))) func concurrentReadersShareTheDatagrams() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            defer { connection.cancel() }
            _ = try await connection.openStream()
            let total = 400
            let received = SharedNumbers()
            let readers = Task {
                await withDiscardingTaskGroup { group in
                    for _ in 0..<4 {
                        group.addTask {
                            for await datagram in connection.datagrams {
                                let done = received.numbers.withLock {
                                    $0.append(Int(datagram[0]) << 8 | Int(datagram[1]))
                                    return $0.count >= total
                                }
                                if done { break }
                            }
                        }
                    }
                    // The first reader to see the last datagram ends; the others end with the connection.
                    _ = try? await world.eventually { received.numbers.withLock { $0.count } >= total }
                    group.cancelAll()
                }
            }
            for number in 0..<total {
                try await connection.datagrams.send(Data([UInt8(number >> 8), UInt8(number & 0xFF)]))
                // Paced in small bursts so the 4,096-datagram inbox bound never drops any.
                if number % 50 == 49 { try await world.sleep(for: .milliseconds(2)) }
            }
            await readers.value
            #expect(received.numbers.withLock { $0.sorted() } == Array(0..<total))
        }
    }
}

/// Numbers several tasks append to.
private final class SharedNumbers: Sendable {
    let numbers = Locked<[Int]>([])
}
