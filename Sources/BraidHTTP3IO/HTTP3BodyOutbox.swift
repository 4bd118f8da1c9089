import BraidCore
import BraidHTTP3
import BraidIO
import DequeModule
import Foundation

/// The send half of one HTTP/3 message body, shared by the application's task and the
/// connection's loop: the application queues chunks (copied once), the engine pulls them as
/// its stream has room (`next()`, the message's `HTTP3BodySource`).
///
/// Bounded: at most `limit` bytes wait here; a `send` beyond that suspends until the engine
/// has taken enough (a chunk larger than the limit is admitted alone, when nothing waits).
/// When the engine finds the queue empty it hears `.pending`, and the next send or `finish`
/// calls `wake` (which posts a loop pass that resumes the body).
package final class HTTP3BodyOutbox: Sendable {
    private struct State {
        var chunks = Deque<StreamBytes>()
        var queuedBytes = 0
        var finished = false
        var error: (any Error)?
        /// The engine found nothing to send and waits for `wake`.
        var engineWaiting = false
        /// Sends waiting for room, in order, with their bytes.
        var senders = Deque<(StreamBytes, Completion<Void>)>()

        /// Admits waiting sends that fit now, in order.
        mutating func admit() -> [Completion<Void>] {
            var admitted: [Completion<Void>] = []
            while let (bytes, completion) = senders.first, queuedBytes == 0 || queuedBytes + bytes.count <= limit {
                senders.removeFirst()
                guard completion.isPending else { continue }
                chunks.append(bytes)
                queuedBytes += bytes.count
                admitted.append(completion)
            }
            return admitted
        }
        let limit: Int
    }

    private let state: Locked<State>
    private let wake: @Sendable () -> Void
    /// The most bytes that wait here for the engine.
    package let limit: Int

    package init(limit: Int, wake: @escaping @Sendable () -> Void) {
        self.limit = limit
        self.wake = wake
        state = Locked(State(limit: limit))
    }

    /// Bytes queued for the engine now.
    package var queuedBytes: Int { state.withLock { $0.queuedBytes } }
    /// Sends waiting for room now.
    package var waitingSends: Int { state.withLock { $0.senders.count } }

    /// Whether nothing is queued or waiting to be.
    package var isIdle: Bool { state.withLock { $0.chunks.isEmpty && $0.senders.isEmpty } }

    // MARK: Application side

    /// Queues `data` (copied once), waiting while the queue is at its limit. Throws the
    /// message's failure (the peer stopped it, the connection ended) or `CancellationError`.
    package func send(_ data: Data) async throws {
        guard !data.isEmpty else { return }
        let bytes = StreamBytes(copying: data)
        let outcome = state.withLock { state -> (error: (any Error)?, queued: Bool, wake: Bool) in
            if let error = state.error { return (error, false, false) }
            if state.finished { return (StreamBridgeError.notWritable, false, false) }
            guard state.senders.isEmpty, state.queuedBytes == 0 || state.queuedBytes + bytes.count <= limit else {
                return (nil, false, false)
            }
            state.chunks.append(bytes)
            state.queuedBytes += bytes.count
            defer { state.engineWaiting = false }
            return (nil, true, state.engineWaiting)
        }
        if let error = outcome.error { throw error }
        if outcome.wake { wake() }
        if outcome.queued { return }
        try await Completion<Void>.wait { completion in
            let (failure, admitted, wakeNow) = state.withLock { state -> ((any Error)?, [Completion<Void>], Bool) in
                if let error = state.error { return (error, [], false) }
                state.senders.append((bytes, completion))
                let admitted = state.admit()
                let wakeNow = state.engineWaiting && !admitted.isEmpty
                if wakeNow { state.engineWaiting = false }
                return (nil, admitted, wakeNow)
            }
            if let failure { completion.resume(.failure(failure)) }
            for admittedSend in admitted { admittedSend.resume(.success(())) }
            if wakeNow { wake() }
        }
    }

    /// Ends the body after the queued bytes.
    package func finish() {
        let wakeNow = state.withLock { state -> Bool in
            guard state.error == nil, !state.finished else { return false }
            state.finished = true
            defer { state.engineWaiting = false }
            return state.engineWaiting
        }
        if wakeNow { wake() }
    }

    // MARK: Loop side

    /// The engine's next chunk: queued bytes, the end once finished and drained, else
    /// `.pending` (and the next send wakes the engine).
    package func next() -> HTTP3BodyChunk {
        let (chunk, admitted) = state.withLock { state -> (HTTP3BodyChunk, [Completion<Void>]) in
            if let bytes = state.chunks.popFirst() {
                state.queuedBytes -= bytes.count
                return (.bytes(bytes, 0..<bytes.count), state.admit())
            }
            if state.finished && state.senders.isEmpty { return (.end(trailers: []), []) }
            state.engineWaiting = true
            return (.pending, [])
        }
        for completion in admitted { completion.resume(.success(())) }
        return chunk
    }

    /// The message cannot be sent (stopped, reset, the connection ended): waiting and later
    /// sends throw `error`; queued bytes are dropped.
    package func fail(_ error: any Error) {
        let waiting = state.withLock { state -> [Completion<Void>] in
            guard state.error == nil else { return [] }
            state.error = error
            state.chunks.removeAll()
            state.queuedBytes = 0
            defer { state.senders.removeAll() }
            return state.senders.map(\.1)
        }
        for completion in waiting { completion.resume(.failure(error)) }
    }
}
