import BraidIO
import Foundation
import Testing

@testable import Braid
@testable import BraidQUIC
@testable import BraidQUICIO

/// Where a QUIC stream's received bytes wait, through the public API on a virtual loop: every
/// stream of a connection's channel, the ones it opens and the ones the peer opens, has its
/// bytes go from the engine's callback into its inbox's memory (a `QUICStreamInboxSink`), and
/// the engine keeps none of them.
@Suite struct QUICStreamReceivePathTests {
    /// What the engine of `connection` has of its streams' received bytes: per stream, whether
    /// it has a sink and how many bytes wait in the engine's own buffer.
    private static func receivePath(of connection: NetworkConnection<QUIC>, on loop: EventLoop) -> [Int64: (sink: Bool, held: Int)] {
        let found = SharedSlot<[Int64: (sink: Bool, held: Int)]>()
        let core = connection.core
        loop.execute { _ in
            guard let engine = core.value.quic.engine else { return }
            found.value = engine.streams.mapValues { ($0.sink is QUICStreamInboxSink, $0.receive.buffered) }
        }
        loop.runPending()
        return found.value ?? [:]
    }

    @Test(.timeLimit(.minutes(3))) func bothEndsReceiveIntoTheInboxAndTheEnginesHoldNothing() async throws {
        let pair = try VirtualPair()
        let client = pair.client
        let request = Data(pattern(seed: 31, count: 300 * 1024))
        let stream = try await pair.run {
            let stream = try await client.openStream()
            try await stream.send(request)
            return stream
        }
        let server = try #require(pair.server)
        // The server reads the whole request and answers it; both streams stay open.
        let answer = Data(pattern(seed: 32, count: 200 * 1024))
        let received = try await pair.run {
            for await handle in server.shared.quic.inboundStreams {
                let inbound = QUIC.Stream(handle, stack: QUICStream())
                let (content, _) = try await inbound.receive(exactly: request.count)
                try await inbound.send(answer)
                return content
            }
            return Data()
        }
        #expect(received == request)
        let (reply, _) = try await pair.run { try await stream.receive(exactly: answer.count) }
        #expect(reply == answer)

        for (end, connection) in [("client", client), ("server", server)] {
            let streams = Self.receivePath(of: connection, on: pair.loop)
            #expect(streams.count == 1, "\(end): \(streams)")
            for (id, path) in streams {
                #expect(path.sink, "\(end)'s stream \(id) has no inbox sink")
                #expect(path.held == 0, "\(end)'s engine holds \(path.held) bytes of stream \(id)")
            }
        }
    }
}
