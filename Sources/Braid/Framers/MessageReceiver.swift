import BraidCore
import BraidIO
import DequeModule
import Foundation

/// The receive side of a framed connection (`TLV`, `Coder`): a `TLVDecoder` fed from the
/// connection's `ByteStreamEnd`, so each `receive()` gets one whole message.
///
/// One receive at a time feeds the decoder: it may have to wait for bytes (an `await`) between
/// looking at the decoder and feeding it, and two receives that each took a piece of the stream
/// and then fed the decoder could feed it out of order. So the feeding receive holds the
/// decoder across its wait, and receives that come meanwhile queue in order; each gets the next
/// whole message. A receive cancelled while it waits for bytes gets none (the inbox decides
/// under its own lock), so the decoder never loses a piece; one cancelled while queued leaves
/// the queue. Both throw `NetworkError.cancelled`.
///
/// A receive that finds a whole message already here, with no receive feeding or queued,
/// takes it without suspending (`decodedMessage`, which `messages` and `receive()` call
/// before anything that suspends): from the decoder if it holds bytes, else straight from
/// the stream's inbox (`StreamInbox.takeMessage`), header and value in one lock round, the
/// value copied once, into its message. A burst of small messages is taken that way, one
/// after another. Only a message not wholly here goes through the decoder, fed exactly the
/// rest of it (its header, then its value), so it too is copied once.
final class MessageReceiver: Sendable {
    private struct State {
        var decoder: TLVDecoder
        /// A receive is feeding the decoder (it may be suspended, waiting for bytes).
        var feeding = false
        var nextTicket: UInt64 = 0
        /// Receives waiting for their turn to feed, in arrival order. Each continuation is
        /// resumed once, by whoever removes it under the lock: `finishFeeding` (its turn) or
        /// its task's cancellation.
        var queued = Deque<(ticket: UInt64, continuation: UnsafeContinuation<Void, any Error>)>()
    }

    private let state: Locked<State>
    /// A custom framer's messages in transit (see `FramerMessages`); empty for other stacks.
    let framerMessages = FramerMessages()

    init(maximumMessageSize: Int) {
        state = Locked(State(decoder: TLVDecoder(maximumMessageSize: maximumMessageSize)))
    }

    /// The next whole message; nil when the peer finished the stream at a message boundary.
    /// Throws `NetworkError.messageTooLarge` (after `tooLarge` ran with it) for a
    /// header announcing more than the maximum, `unexpectedEndOfStream` for a stream that
    /// ends inside a message, and the connection's errors. `sharingStorage`: as
    /// `TLVDecoder.next(sharingStorage:)`, for a message decoded at once and dropped.
    func receive(from end: ByteStreamEnd, sharingStorage: Bool = false, tooLarge: @Sendable (NetworkError) -> Void) async throws -> TLVMessage? {
        if let message = try decodedMessage(from: end, sharingStorage: sharingStorage, tooLarge: tooLarge) { return message }
        return try await NetworkError.mapping {
            try await startFeeding()
            defer { finishFeeding() }
            return try await feed(from: end, sharingStorage: sharingStorage, tooLarge: tooLarge)
        }
    }

    /// A whole message already decoded, taken in one lock round without suspending; nil when
    /// none is, or when a receive is feeding or queued (they come first). Throws as `receive`
    /// does for a header announcing more than the maximum.
    func decodedMessage(from end: ByteStreamEnd, sharingStorage: Bool = false, tooLarge: @Sendable (NetworkError) -> Void) throws(NetworkError) -> TLVMessage? {
        let decoded: Result<TLVMessage, TLVFramingError>? = state.withLock { state in
            guard !state.feeding, state.queued.isEmpty else { return nil }
            do throws(TLVFramingError) {
                return try Self.next(&state.decoder, from: end.inbox, sharingStorage: sharingStorage).map { .success($0) }
            } catch {
                return .failure(error)
            }
        }
        switch decoded {
        case .success(let message)?:
            Self.returnCredit(end)
            return message
        case .failure(let error)?: throw Self.framingFailure(error, tooLarge: tooLarge)
        case nil: return nil
        }
    }

    /// The decoder's next message; once it holds nothing, the inbox's next whole message
    /// (a header announcing more than the maximum is left there, for the decoder to refuse
    /// once fed). Under the receiver's lock, so messages are taken in order.
    private static func next(_ decoder: inout TLVDecoder, from inbox: StreamInbox, sharingStorage: Bool) throws(TLVFramingError) -> TLVMessage? {
        if let message = try decoder.next(sharingStorage: sharingStorage) { return message }
        guard decoder.isAtMessageBoundary else { return nil }
        let maximum = decoder.maximumMessageSize
        let take = inbox.takeMessage(headerSize: TLVFraming.headerSize) { header in
            let length = Int(UInt32(truncatingIfNeeded: header))
            return length <= maximum ? length : nil
        }
        guard case .message(let header, let value) = take else { return nil }
        return TLVMessage(type: UInt32(truncatingIfNeeded: header >> 32), value: value)
    }

    /// Has the credit of bytes taken from the inbox go back (in a coalesced loop pass).
    private static func returnCredit(_ end: ByteStreamEnd) {
        if end.inbox.claimCreditPass() { end.postCreditPass() }
    }

    /// Decodes, reading from `end` whenever the decoder needs bytes, until a whole message (or
    /// the end of the stream). Only the feeding receive calls it.
    private func feed(from end: ByteStreamEnd, sharingStorage: Bool, tooLarge: @Sendable (NetworkError) -> Void) async throws -> TLVMessage? {
        while true {
            let step: Result<(message: TLVMessage?, needed: Int, buffered: Int), TLVFramingError> = state.withLock { state in
                Result { () throws(TLVFramingError) in
                    (try Self.next(&state.decoder, from: end.inbox, sharingStorage: sharingStorage), state.decoder.bytesNeeded, state.decoder.bufferedByteCount)
                }
            }
            let decoded: (message: TLVMessage?, needed: Int, buffered: Int)
            switch step {
            case .failure(let error): throw Self.framingFailure(error, tooLarge: tooLarge)
            case .success(let result): decoded = result
            }
            if let message = decoded.message {
                Self.returnCredit(end)
                return message
            }
            // Exactly the rest of this message (its header, then its value): the messages
            // after it stay in the inbox, to be taken from there whole, and the value arrives
            // as one piece the decoder hands on as it is.
            let delivery = try await end.receive(minimum: decoded.needed, maximum: decoded.needed, exact: false)
            state.withLock { $0.decoder.append(delivery.content) }
            if delivery.endOfStream && delivery.content.isEmpty {
                guard decoded.buffered > 0 else { return nil }
                throw NetworkError.unexpectedEndOfStream(received: decoded.buffered, wanted: decoded.buffered + decoded.needed)
            }
        }
    }

    private static func framingFailure(_ error: TLVFramingError, tooLarge: @Sendable (NetworkError) -> Void) -> NetworkError {
        guard case .messageTooLarge(_, let size, let maximum) = error else { return NetworkError(error) }
        let failure = NetworkError.messageTooLarge(size: Int(size), maximum: maximum)
        tooLarge(failure)
        return failure
    }

    /// Waits for this receive's turn to feed the decoder; throws `CancellationError` if the
    /// task is cancelled while it waits (the caller maps it).
    private func startFeeding() async throws {
        let ticket: UInt64? = state.withLock { state in
            if !state.feeding {
                state.feeding = true
                return nil
            }
            state.nextTicket += 1
            return state.nextTicket
        }
        guard let ticket else { return }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let outcome: Bool? = state.withLock { state in
                    if Task.isCancelled { return false }
                    if !state.feeding {
                        state.feeding = true
                        return true
                    }
                    state.queued.append((ticket, continuation))
                    return nil
                }
                // Resumed outside the lock.
                switch outcome {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let removed = state.withLock { state in
                state.queued.firstIndex { $0.ticket == ticket }.map { state.queued.remove(at: $0).continuation }
            }
            removed?.resume(throwing: CancellationError())
        }
    }

    /// Hands the decoder to the next queued receive, or frees it.
    private func finishFeeding() {
        let next = state.withLock { state -> UnsafeContinuation<Void, any Error>? in
            guard !state.queued.isEmpty else {
                state.feeding = false
                return nil
            }
            // Handed over: `feeding` stays true for the next receive.
            return state.queued.removeFirst().continuation
        }
        next?.resume()
    }
}
