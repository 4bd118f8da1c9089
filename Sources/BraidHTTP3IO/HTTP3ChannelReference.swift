import BraidCore
import BraidHTTP3
import BraidIO
import Foundation

/// How application-side objects (`HTTP3Exchange`, the public client and server) reach an
/// `HTTP3Channel` on its loop without keeping it alive: a weak reference, used only there.
package final class HTTP3ChannelReference: @unchecked Sendable {
    // Unchecked: `channel` is read and written only on `loop`'s thread.
    package let loop: EventLoop
    /// The most body bytes each exchange's outbox holds.
    let bodyLimit: Int
    weak var channel: HTTP3Channel?

    init(loop: EventLoop, bodyLimit: Int) {
        self.loop = loop
        self.bodyLimit = bodyLimit
    }

    /// Runs `work` on the loop with the channel, if it still exists.
    func onLoop(_ work: @escaping @Sendable (HTTP3Channel, LoopContext) -> Void) {
        loop.execute { [self] context in
            guard let channel else { return }
            work(channel, context)
        }
    }

    /// Runs `work` on the loop with the channel, at once when called on the loop's thread (a
    /// handler task the loop runs), else posted as `onLoop` does. Only for calls made from a
    /// task's own code, never from inside the channel's (which such a call would re-enter):
    /// a handler's response and its return then cost no posted pass of their own.
    func onLoopNow(_ work: @escaping @Sendable (HTTP3Channel, LoopContext) -> Void) {
        guard let context = loop.currentContext else { return onLoop(work) }
        guard let channel else { return }
        work(channel, context)
    }

    /// Server: starts a graceful shutdown (GOAWAY, then close once the requests taken have
    /// finished or the grace period has passed).
    package func shutDownGracefully() {
        onLoop { channel, context in channel.shutDownGracefully(context: context) }
    }

    /// Client: sends a request's header section on a new stream (once the handshake and the
    /// peer's stream limit allow) and returns its exchange at once, without waiting for the
    /// loop: the response's `head()` reports a request that could not be sent. Its body, if
    /// `hasBody`, follows through the exchange's outbox. `queued` runs on the loop once the
    /// request waits in the channel (the client starts a new connection there, so its first
    /// request is queued before the connection's engine exists and goes as 0-RTT data when it
    /// resumes).
    package func sendRequest(fields: [HTTP3Field], hasBody: Bool, queued: @escaping @Sendable () -> Void = {}) -> HTTP3Exchange {
        let exchange = HTTP3Exchange(streamID: nil, requestFields: [], channel: self, bodyLimit: bodyLimit)
        loop.execute { [self] context in
            guard let channel else {
                exchange.fail(HTTP3Error.invalidState("The HTTP/3 connection has ended."))
                return
            }
            channel.sendRequest(exchange, fields: fields, hasBody: hasBody, context: context)
            queued()
        }
        return exchange
    }
}
