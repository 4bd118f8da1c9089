import BraidIO
import BraidQUICIO
import Foundation
import Testing

@testable import Braid

/// What a connection leaves behind: once it has ended and nobody holds it, its owner on the
/// loop (the channel, its streams, the establishment that raced it) is gone, so a process that
/// makes connections all day does not grow. In memory (`MemoryWorld`).
@Suite struct ConnectionLifetimeTests {
    /// Weak references to a connection's loop-side objects, read on its loop.
    private final class Watch: @unchecked Sendable {
        weak var core: ConnectionCore?
        weak var channel: QUICChannel?
        /// Made for every QUIC client (it moves the connection when its path goes away); the
        /// loop's interface-change signal must let go of it when the connection ends.
        weak var pathWatch: ConnectionPathWatch?
    }

    private func watch(_ connection: NetworkConnection<QUIC>) async throws -> Watch {
        let core = connection.core
        let watch = Watch()
        try await connection.loop.submit { _ in
            watch.core = core.value
            watch.channel = core.value.quic
            watch.pathWatch = core.value.madePathWatch
        }
        return watch
    }

    /// True once nothing holds the watched objects (checked on `loop` every 10 ms of virtual
    /// time, for up to a minute of it: a connection that never completed its handshake keeps
    /// its closing state for three probe timeouts of the initial 333 ms RTT guess).
    private func released(_ watch: Watch, on loop: EventLoop, in world: MemoryWorld) async throws -> Bool {
        try await world.eventually(every: .milliseconds(10)) {
            try await loop.submit { _ in watch.core == nil && watch.channel == nil && watch.pathWatch == nil }
        }
    }

    /// A client that echoed on a stream and closed: its owner goes once the close is done.
    @Test(.timeLimit(.minutes(10))) func aClosedClientLeavesNothingBehind() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            var connection: NetworkConnection<QUIC>? = NetworkConnection(to: server.endpoint) { testClient() }
            do {
                // A stream keeps its connection's owner; this one goes with the block.
                let stream = try await connection!.openStream()
                try await stream.send(Data("ping".utf8), endOfStream: true)
                #expect(try await stream.receive(exactly: 4).content == Data("ping".utf8))
            }
            let watch = try await watch(connection!)
            let loop = connection!.loop
            await connection!.close()
            connection = nil
            #expect(try await released(watch, on: loop, in: world))
        }
    }

    /// A client cancelled while it still races its handshake (the server never answers): the
    /// establishment that stood in for its transport lets go too.
    @Test(.timeLimit(.minutes(10))) func aClientCancelledBeforeReadyLeavesNothingBehind() async throws {
        try await MemoryWorld.run { world in
            // Nobody there: what the client sends vanishes and the handshake never ends.
            var connection: NetworkConnection<QUIC>? = NetworkConnection(to: world.nobody()) { testClient() }
            connection!.start()
            let watch = try await watch(connection!)
            let loop = connection!.loop
            try await world.sleep(for: .milliseconds(50))
            await connection!.close()
            connection = nil
            #expect(try await released(watch, on: loop, in: world))
        }
    }
}
