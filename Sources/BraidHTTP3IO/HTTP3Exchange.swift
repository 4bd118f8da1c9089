import BraidCore
import BraidHTTP3
import BraidIO
import Foundation

/// One request and its response on an HTTP/3 connection, as the application's tasks see it
/// (`Sendable`; the connection's `HTTP3Channel` fills it on its loop).
///
/// - `inbox`: the body received (the response's on a client, the request's on a server).
///   Its flow-control credit goes back to the peer only as the application consumes it
///   (`receiveBody`), so unread body bytes are bounded by the QUIC stream window.
/// - `outbox`: the body sent, pulled by the engine as the stream has room, bounded by
///   `HTTP3BodyOutbox.limit`.
/// - `head()`: the peer's final header section (a client's response; a server's request is
///   given at once as `requestFields`).
package final class HTTP3Exchange: Sendable {
    /// The exchange's stream: a server's at once; a client's once the loop has opened it (-1
    /// until then: a request waits for the handshake and the peer's stream limit).
    package var streamID: Int64 { stream.id.withLock { $0 } }
    private let stream: StreamIDCell
    package let inbox = StreamInbox()
    package let outbox: HTTP3BodyOutbox
    /// Server: the request's header section.
    package let requestFields: [HTTP3Field]
    private let channel: HTTP3ChannelReference
    private let headState = Locked<HeadState>(HeadState())
    /// Whether the exchange has ended, and what runs when it does.
    private let ending = Locked<(ended: Bool, action: (@Sendable () -> Void)?)>((false, nil))

    private struct HeadState {
        var result: Result<[HTTP3Field], any Error>?
        var waiter: Completion<[HTTP3Field]>?
    }

    init(streamID: Int64?, requestFields: [HTTP3Field], channel: HTTP3ChannelReference, bodyLimit: Int) {
        let stream = StreamIDCell(streamID ?? -1)
        self.stream = stream
        self.requestFields = requestFields
        self.channel = channel
        outbox = HTTP3BodyOutbox(limit: bodyLimit) { [channel] in
            // The stream is read on the loop, where it is assigned. Sends and `finish` come
            // from the application's tasks, never from the channel's code.
            channel.onLoopNow { channel, context in channel.resumeBody(streamID: stream.id.withLock { $0 }, context: context) }
        }
    }

    /// Client: the stream the loop opened for the request.
    func assign(streamID: Int64) {
        stream.id.withLock { $0 = streamID }
    }

    /// Whether the exchange has failed or been retired.
    var hasEnded: Bool { ending.withLock { $0.ended } }

    // MARK: Application side

    /// Client: the final response's header section, once it arrives.
    package func head() async throws -> [HTTP3Field] {
        try await Completion<[HTTP3Field]>.wait { completion in
            let result = headState.withLock { state -> Result<[HTTP3Field], any Error>? in
                if let result = state.result { return result }
                state.waiter = completion
                return nil
            }
            if let result { completion.resume(result) }
        }
    }

    /// Up to `maximum` bytes of the received body (nil at its end). Consumed bytes' credit
    /// goes back to the peer in coalesced loop passes.
    package func receiveBody(maximum: Int) async throws -> Data? {
        let delivery = try await inbox.receive(StreamInbox.Request(minimum: 1, maximum: maximum, exact: false)) {
            postCreditPass()
        }
        // An exchange that has ended was retired (or will be, as its stream closes), and that
        // returns the credit of everything it received: a pass would find nothing to do.
        if !hasEnded, inbox.claimCreditPass() { postCreditPass() }
        if delivery.content.isEmpty && delivery.endOfStream { return nil }
        return delivery.content
    }

    private func postCreditPass() {
        channel.onLoop { [self] channel, context in channel.returnCredit(streamID: streamID, context: context) }
    }

    /// Runs `action` once the exchange has failed or been retired (the peer reset it, the
    /// connection ended, its stream closed), at once if it already has; one action at most.
    /// A server cancels its handler's task there.
    package func whenEnded(_ action: @escaping @Sendable () -> Void) {
        let ended = ending.withLock { state -> Bool in
            if !state.ended { state.action = action }
            return state.ended
        }
        if ended { action() }
    }

    /// Server: sends the response's header section; its body follows through `outbox` (then
    /// `outbox.finish()`) when `hasBody`.
    ///
    /// Returns at once. Called on the loop's thread (a handler task the loop runs), the head
    /// is handed to the engine there and then; elsewhere the loop takes it in a pass it is
    /// sent. Either way it goes out at the end of the loop's pass, with the body bytes queued
    /// by then (a handler on the loop queues its whole small body first, so head, body and
    /// end leave in one write, without waking the loop for each). A head that cannot be
    /// sent (the stream ended) fails the outbox, so body sends throw. Call it from a task,
    /// not from the loop's own work.
    package func respond(fields: [HTTP3Field], hasBody: Bool) {
        channel.onLoopNow { [self] channel, context in
            channel.sendResponse(self, fields: fields, hasBody: hasBody, context: context)
        }
    }

    /// Server: the request's handler has returned. Until then the request's stream counts
    /// against the client's stream limit, even once it has closed; call it once, whatever
    /// became of the exchange.
    package func handlerFinished() {
        channel.onLoopNow { [self] channel, context in channel.handlerFinished(streamID: streamID, context: context) }
    }

    /// Ends the exchange early: the stream is reset and stopped with H3_REQUEST_CANCELLED
    /// (nothing happens if it already completed).
    package func cancel() {
        outbox.fail(CancellationError())
        channel.onLoop { [self] channel, context in channel.cancel(self, context: context) }
    }

    // MARK: Loop side

    func deliverHead(_ result: Result<[HTTP3Field], any Error>) {
        let waiter = headState.withLock { state -> Completion<[HTTP3Field]>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(result)
    }

    /// Fails the head with the error `makeError` makes, unless a head was delivered already
    /// (then nothing is made).
    func deliverHeadIfMissing(_ makeError: () -> any Error) {
        guard !headState.withLock({ $0.result != nil }) else { return }
        deliverHead(.failure(makeError()))
    }

    /// The exchange failed: every waiting and later call throws `error` (received body bytes
    /// queued before stay readable).
    func fail(_ error: any Error) {
        deliverHead(.failure(error))
        inbox.fail(error)
        outbox.fail(error)
        end()
    }

    /// The exchange's stream closed: if its message ended both ways (the body received has
    /// ended, nothing waits to be sent), it ends here and returns true; otherwise nothing
    /// happens (the caller fails it with the reason, which is then worth describing).
    func retireIfComplete() -> Bool {
        guard inbox.hasEnded, outbox.isIdle else { return false }
        outbox.fail(Self.notWritable)
        end()
        return true
    }

    /// What sends on a completed exchange throw, made once.
    private static let notWritable: any Error = StreamBridgeError.notWritable

    private func end() {
        let action = ending.withLock { state -> (@Sendable () -> Void)? in
            state.ended = true
            defer { state.action = nil }
            return state.action
        }
        action?()
    }
}

/// An exchange's stream ID, shared with its outbox's wake-up (made before the exchange is).
private final class StreamIDCell: Sendable {
    let id: Locked<Int64>

    init(_ id: Int64) {
        self.id = Locked(id)
    }
}
