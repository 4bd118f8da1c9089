import BraidCore
import BraidIO
import DequeModule
import Foundation

/// A lock whose holder may suspend: tasks queue in order and each gets the lock in turn. A
/// task cancelled while queued leaves the queue and throws `CancellationError`; the lock is
/// handed straight to the next task on `unlock`, so no late arrival can jump the queue.
final class AsyncLock: Sendable {
    private struct State {
        var locked = false
        var nextID: UInt64 = 0
        var waiters = Deque<(id: UInt64, continuation: CheckedContinuation<Void, any Error>)>()
    }

    private let state = Locked(State())

    func lock() async throws {
        let id: UInt64? = state.withLock { state in
            if !state.locked {
                state.locked = true
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Bool? = state.withLock { state in
                    if Task.isCancelled { return false }
                    if !state.locked {
                        state.locked = true
                        return true
                    }
                    state.waiters.append((id, continuation))
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
                state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0).continuation }
            }
            removed?.resume(throwing: CancellationError())
        }
    }

    func unlock() {
        let next = state.withLock { state in
            if state.waiters.isEmpty {
                state.locked = false
                return nil as CheckedContinuation<Void, any Error>?
            }
            // Handed over: the lock stays locked for the next holder.
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }

    func withLock<T>(_ body: () async throws -> T) async throws -> T {
        try await lock()
        defer { unlock() }
        return try await body()
    }
}

/// The receive side of a framed connection (`TLV`, `Coder`): a `TLVDecoder` fed from the
/// connection's `ByteStreamEnd`, so each `receive()` gets one whole message.
///
/// Receives are serialized by an `AsyncLock`, held while the holder waits for bytes. A plain
/// `Mutex` around the decoder is not enough: a receive must wait for bytes (an `await`) between
/// looking at the decoder and feeding it, and two receives that each took a piece of the
/// stream and then fed the decoder could feed it out of order. Under the async lock one
/// receive at a time takes bytes and decodes them, in stream order; concurrent receivers queue
/// and each gets the next whole message. A receive cancelled while it waits for bytes gets
/// none (the inbox decides under its own lock), so the decoder never loses a piece.
final class MessageReceiver: Sendable {
    private let lock = AsyncLock()
    /// Touched only by the async lock's holder; a `Locked` so the class is `Sendable` (never
    /// contended).
    private let decoder: Locked<TLVDecoder>

    init(maximumMessageSize: Int) {
        decoder = Locked(TLVDecoder(maximumMessageSize: maximumMessageSize))
    }

    /// The next whole message; nil when the peer finished the stream at a message boundary.
    /// Throws `NetworkError.messageTooLarge` (after `tooLarge` ran with it) for a
    /// header announcing more than the maximum, `unexpectedEndOfStream` for a stream that
    /// ends inside a message, and the connection's errors.
    func receive(from end: ByteStreamEnd, tooLarge: @Sendable (NetworkError) -> Void) async throws -> TLVMessage? {
        try await NetworkError.mapping {
            try await lock.withLock {
                while true {
                    let step: Result<(message: TLVMessage?, needed: Int, buffered: Int), TLVFramingError> = decoder.withLock { decoder in
                        Result { () throws(TLVFramingError) in (try decoder.next(), decoder.bytesNeeded, decoder.bufferedByteCount) }
                    }
                    switch step {
                    case .failure(.messageTooLarge(_, let size, let maximum)):
                        let error = NetworkError.messageTooLarge(size: Int(size), maximum: maximum)
                        tooLarge(error)
                        throw error
                    case .success(let decoded):
                        if let message = decoded.message { return message }
                        // Ask for the rest of this message at least, and take up to 64 KiB
                        // beyond it so a burst of small messages costs one receive.
                        let delivery = try await end.receive(
                            minimum: decoded.needed, maximum: max(decoded.needed, 64 * 1024), exact: false)
                        decoder.withLock { $0.append(delivery.content) }
                        if delivery.endOfStream && delivery.content.isEmpty {
                            guard decoded.buffered > 0 else { return nil }
                            throw NetworkError.unexpectedEndOfStream(received: decoded.buffered, wanted: decoded.buffered + decoded.needed)
                        }
                    }
                }
            }
        }
    }
}
