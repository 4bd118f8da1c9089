import BraidCore
import BraidIO
import Foundation

/// What the application's tasks read of an `HTTP3Channel` without a trip to its loop: the
/// requests a server receives, in order, and whether the connection still takes new requests.
package final class HTTP3ChannelShared: Sendable {
    private struct State {
        var goingAway = false
        var error: (any Error)?
        var earlyRequests = 0
    }
    private let state = Locked(State())
    /// Server: each request as its header section arrives (unless `onRequest` takes them);
    /// ends when the connection does. Unbounded in count only as far as the QUIC stream
    /// limit lets the peer open streams.
    package let requests: AsyncStream<HTTP3Exchange>
    private let continuation: AsyncStream<HTTP3Exchange>.Continuation
    /// Server: takes each request on the loop, as it arrives, in place of `requests` (which
    /// then only ends): a server that starts a task per request starts it there, without a
    /// task of its own woken for each.
    private let onRequest: (@Sendable (HTTP3Exchange) -> Void)?

    init(onRequest: (@Sendable (HTTP3Exchange) -> Void)? = nil) {
        (requests, continuation) = AsyncStream.makeStream()
        self.onRequest = onRequest
    }

    /// False once the peer sent GOAWAY or the connection ended: new requests need a new
    /// connection.
    package var takesNewRequests: Bool { state.withLock { !$0.goingAway && $0.error == nil } }
    /// Client: how many requests were sent before the handshake completed (as 0-RTT data,
    /// or again in 1-RTT packets if the server rejected it).
    package var earlyRequests: Int { state.withLock { $0.earlyRequests } }
    /// Why the connection ended, once it has.
    package var error: (any Error)? { state.withLock { $0.error } }

    func deliver(_ exchange: HTTP3Exchange) {
        if let onRequest { onRequest(exchange) } else { continuation.yield(exchange) }
    }

    func countEarlyRequest() { state.withLock { $0.earlyRequests += 1 } }

    func markGoingAway() { state.withLock { $0.goingAway = true } }

    func end(_ error: any Error) {
        state.withLock { $0.error = error }
        continuation.finish()
    }
}
