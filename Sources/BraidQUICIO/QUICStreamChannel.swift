import BraidIO
import BraidQUIC
import Foundation

/// What the public layer keeps of a stream: made on the stream's loop, usable from any thread.
package struct QUICStreamHandle: Sendable {
    /// The loop-side state, for calls that must run on the loop.
    package let channel: LoopBound<QUICStreamChannel>
    package let id: Int64
    package let isBidirectional: Bool
    package let locallyInitiated: Bool
    /// What callers receive from and send into without a trip to the loop.
    package let inbox: StreamInbox
    package let outbox: StreamOutbox
}

/// One stream's loop-side state: moves bytes between the engine and the stream's inbox and
/// outbox, which the application's tasks use directly (see `StreamInbox`, `StreamOutbox`).
///
/// Every byte the peer sends on the stream lands in the inbox's memory as the engine receives
/// it (through the stream's `QUICStreamInboxSink`, the one copy after decryption) and reaches
/// the reader when the owner publishes it (`pull`), but its flow-control credit goes back only
/// as the application consumes it, so a reader that stops reading still stops the peer at the
/// stream's flow-control window. Queued sends are handed to the engine in 64 KiB pieces while
/// it accepts them (`sendRoom`: the stream's bound, and the connection's, which no piece
/// passes), so a large send waits for acknowledgements instead of growing memory.
package final class QUICStreamChannel {
    let id: Int64
    let locallyInitiated: Bool
    private let channel: QUICChannel
    /// Where the engine puts the stream's received bytes: the inbox's memory.
    let sink: QUICStreamInboxSink
    let inbox: StreamInbox
    let outbox: StreamOutbox
    static let sendChunk = 64 * 1024
    /// Set by `abort`, which acts once.
    private var aborted = false

    init(
        id: Int64, channel: QUICChannel, locallyInitiated: Bool, sink: QUICStreamInboxSink, sendLimit: Int, budget: SharedSendBudget, open: Bool
    ) {
        self.id = id
        self.channel = channel
        self.locallyInitiated = locallyInitiated
        self.sink = sink
        inbox = sink.inbox
        outbox = StreamOutbox(limit: sendLimit, open: open, budget: budget)
    }

    /// The handle the public layer keeps (made on the loop).
    var handle: QUICStreamHandle {
        QUICStreamHandle(
            channel: LoopBound(self, on: channel.loop), id: id, isBidirectional: isBidirectional,
            locallyInitiated: locallyInitiated, inbox: inbox, outbox: outbox)
    }
    var isBidirectional: Bool { id & 2 == 0 }
    var canReceive: Bool { isBidirectional || !locallyInitiated }
    var canSend: Bool { isBidirectional || locallyInitiated }

    // MARK: Receiving

    /// Publishes what the sink received to the inbox, with the stream's end if it came (waiting
    /// receives get theirs), and returns the credit of what the application has consumed, in
    /// one lock round. The engine read takes no bytes (they went to the sink) but tells the
    /// engine the owner has them, and reports the FIN or the peer's reset.
    func pull(_ context: LoopContext) {
        guard canReceive, let connection = channel.engine else { return }
        let id = id, describe = channel.describe
        let credit = inbox.fill(publishing: &sink.writer) {
            do {
                let read = try connection.read(streamID: id, maxBytes: 0, returnsCredit: false) { _ in }
                return read.fin ? .finished : nil
            } catch {
                return .failed(describe(error))
            }
        }
        returnCredit(credit, context)
    }

    /// Gives the engine back the credit of bytes the application has consumed.
    package func returnConsumedCredit(_ context: LoopContext) {
        returnCredit(inbox.takeCredit(), context)
    }

    private func returnCredit(_ credit: Int, _ context: LoopContext) {
        guard credit > 0, let connection = channel.engine else { return }
        connection.returnCredit(streamID: id, bytes: credit)
        channel.transmit(context)
    }

    // MARK: Sending

    /// Hands queued sends to the engine while it has room; each waiting send completes once all
    /// of its bytes are with the engine.
    package func pump(_ context: LoopContext) {
        guard let connection = channel.engine else { return }
        // A client's data may go out in 0-RTT (replayable) only when the caller said it is
        // idempotent. A server may answer before the handshake completes (0.5-RTT data
        // travels under 1-RTT keys and cannot be replayed), which is what makes a 0-RTT
        // request's answer arrive one round trip after it was sent.
        let clientBeforeReady = !channel.isReady && connection.role == .client
        var wrote = false
        let id = id, describe = channel.describe
        outbox.drain { entry -> Int? in
            if clientBeforeReady && !entry.idempotent { return nil }
            var offset = entry.offset
            do {
                while offset < entry.count {
                    let room = connection.sendRoom(streamID: id)
                    guard room > 0 else { break }
                    let end = min(offset + min(Self.sendChunk, room), entry.count)
                    try connection.send(
                        streamID: id, bytes: entry.ownedBytes, range: offset..<end, fin: entry.endOfStream && end == entry.count)
                    offset = end
                    wrote = true
                }
                if entry.count == 0 && entry.endOfStream {
                    try connection.send(streamID: id, bytes: EmptyCollection<UInt8>(), fin: true)
                    wrote = true
                }
            } catch {
                throw describe(error)
            }
            return offset
        } unacknowledged: {
            connection.unacknowledgedBytes(streamID: id)
        }
        channel.publishSendBudget(streamID: id)
        if wrote { channel.transmit(context) }
    }

    /// The connection is ready: sends go to the engine at once from now on.
    func connectionReady(_ context: LoopContext) {
        outbox.open()
        pump(context)
    }

    // MARK: Ending

    func peerStopped(code: UInt64?) {
        outbox.fail(channel.describe(QUICError.streamStopped(streamID: id, code: code)))
    }

    func engineClosed(_ context: LoopContext) {
        pull(context)
        // Finished or failed already in all but odd cases; a receive must never wait forever.
        inbox.fail(channel.describe(QUICError.invalidState("the stream closed without an end of stream")))
        // The engine is done with the stream, so a send side still open (not finished by the
        // application) was stopped by the peer (ngtcp2 0.12.1 closes a stream the peer both
        // reset and stopped with one code without reporting the stop): sends from now on would
        // go nowhere, so they fail instead.
        if canSend && !outbox.isFinished {
            outbox.fail(channel.describe(QUICError.streamStopped(streamID: id, code: nil)))
        }
    }

    /// The connection ended: every waiting call fails with its reason (receives first get the
    /// bytes already queued).
    func connectionEnded(_ error: any Error) {
        inbox.fail(error)
        outbox.fail(error)
    }

    package func reset(code: UInt64, context: LoopContext) throws {
        do { try channel.engine?.resetStream(streamID: id, applicationErrorCode: code) } catch { throw channel.describe(error) }
        outbox.fail(
            channel.describe(QUICError.invalidState("the stream was reset locally")), waiters: channel.describe(CancellationError()))
        channel.transmit(context)
    }

    package func stopSending(code: UInt64, context: LoopContext) throws {
        do { try channel.engine?.stopSending(streamID: id, applicationErrorCode: code) } catch { throw channel.describe(error) }
        inbox.fail(channel.describe(QUICError.invalidState("receiving was stopped locally")))
        channel.transmit(context)
    }

    /// The application gives the stream up, both ways at once: a framer whose peer announced a
    /// message over its maximum has lost the message boundaries. STOP_SENDING and RESET_STREAM
    /// with `code` (for the directions the stream has), and every call on the stream fails with
    /// `error` from now on. Acts once; the connection and its other streams go on.
    package func abort(code: UInt64, error: any Error, context: LoopContext) {
        guard !aborted else { return }
        aborted = true
        if let connection = channel.engine {
            // A direction that already ended (the peer's FIN read, or ours acknowledged) has
            // nothing left to stop, and the engine refuses it: the other direction still goes.
            if canReceive { try? connection.stopSending(streamID: id, applicationErrorCode: code) }
            if canSend { try? connection.resetStream(streamID: id, applicationErrorCode: code) }
            channel.transmit(context)
        }
        inbox.fail(error)
        outbox.fail(error)
    }

    /// A stream opened for a call that was cancelled before it got the stream.
    func abandon(_ context: LoopContext) {
        try? channel.engine?.resetStream(streamID: id, applicationErrorCode: 0)
        channel.transmit(context)
    }
}
