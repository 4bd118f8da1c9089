import BraidCore
import DequeModule

/// The send half of a byte stream, shared by the application's tasks and the stream's loop.
///
/// A send of at most `maxQueuedSend` bytes that fits under the stream's bound is queued under
/// the lock and returns at once; only the first send of a burst posts a pass to the loop, which
/// hands everything queued to the engine. Any other send waits, and the loop completes it once
/// all its bytes are with the engine: a larger send, one that does not fit, one before the
/// stream may carry data (a client before its handshake), or one behind an earlier waiting
/// send, so order always holds.
///
/// The bound (a `SendBudget`): a send is taken at once only while the bytes the engine holds
/// unacknowledged (as the loop last published them), those queued here and its own fit in
/// `limit`; a waiting send
/// is handed over while the engine's unacknowledged bytes are below `limit`. So a stream holds
/// at most `limit` plus one send's last piece.
///
/// Small sends on a stream without a budget (TLS, TCP) need no `StreamBytes` of their own: they
/// are copied into a shared block that the next small sends go on filling (see
/// `offer(count:endOfStream:writing:)`); an entry's `count` says how far.
///
/// With a `budget` (a QUIC connection's, shared by its streams), every send was charged to it
/// before it came here (`SharedSendBudget.admit`); the outbox gives the charge back for bytes it
/// drops and hands it over for bytes the engine takes.
package final class StreamOutbox: Sendable {
    /// What `offer` decided.
    package enum Offer {
        /// Queued; with `drainNeeded` the caller must post a pass that drains the outbox.
        case accepted(drainNeeded: Bool)
        /// Not queued: wait (`enqueue` with a completion).
        case mustWait
        /// Not queued: the stream cannot send any more.
        case failed(any Error)
    }

    /// A send's bytes: copied for it (`StreamBytes`, or a block small sends share), or the
    /// caller's own immutable value, borrowed (plain TCP, which takes the bytes on the loop and
    /// keeps no pointer to them; a QUIC engine keeps pointers until acknowledged, so its
    /// streams always copy).
    package enum Storage: Sendable {
        case owned(StreamBytes)
        /// A standard byte container (`Data`, an array or slice of one) whose
        /// `withContiguousStorageIfAvailable` gives its bytes (checked when it was queued).
        case borrowed(any Collection<UInt8> & Sendable)

        package var count: Int {
            switch self {
            case .owned(let bytes): bytes.count
            case .borrowed(let content): content.count
            }
        }
    }

    /// Queued bytes: a send (or small sends sharing one block), and how far the engine has
    /// taken them.
    package struct Entry {
        package let storage: Storage
        /// The bytes of `storage` queued: all of them, or for a shared block the part small
        /// sends have filled (the rest is written only under the outbox's lock, after the end).
        package var count: Int
        package var offset = 0
        package var endOfStream: Bool
        package let idempotent: Bool
        /// The waiting `send`, resumed once every byte is with the engine; nil for a send that
        /// already returned.
        let completion: Completion<Void>?
        /// A shared block's memory, where small sends may still be copied in after `count`
        /// (see `offer(count:endOfStream:writing:)`); nil for any other entry. A plain
        /// pointer, so extending the entry needs no reference count: `storage` keeps it alive.
        let sharedBlock: UnsafeMutableRawBufferPointer?

        init(storage: Storage, endOfStream: Bool, idempotent: Bool, completion: Completion<Void>?) {
            self.storage = storage
            count = storage.count
            self.endOfStream = endOfStream
            self.idempotent = idempotent
            self.completion = completion
            sharedBlock = nil
        }

        /// A block small sends share, with the first one's `count` bytes in it.
        init(sharedBlock: StreamBytes, count: Int, endOfStream: Bool) {
            storage = .owned(sharedBlock)
            self.sharedBlock = sharedBlock.base
            self.count = count
            self.endOfStream = endOfStream
            idempotent = false
            completion = nil
        }

        /// The entry's own memory; nil for a borrowed send.
        package var bytes: StreamBytes? {
            guard case .owned(let bytes) = storage else { return nil }
            return bytes
        }

        /// The entry's own memory, for an engine that keeps pointers into it (QUIC, whose
        /// sends are never borrowed).
        package var ownedBytes: StreamBytes {
            guard let bytes else { preconditionFailure("a borrowed send reached an engine that keeps its bytes") }
            return bytes
        }

        /// Runs `body` over the entry's bytes from `offset` to its end (`count`, not the end of
        /// a shared block, which goes on past it). `body` must not keep the pointer.
        package func withBytes<Result>(from offset: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
            switch storage {
            case .owned(let bytes):
                return try body(UnsafeRawBufferPointer(rebasing: bytes.base[offset..<count]))
            case .borrowed(let content):
                let count = count
                return try content.withContiguousStorageIfAvailable { buffer in
                    try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[offset..<count]))
                }!
            }
        }
    }

    private struct State {
        var queue = Deque<Entry>()
        /// The shared block small sends are filling, after everything in `queue`. Kept out of
        /// the queue so it grows in place (a `Deque` element is copied out and back to be
        /// changed, a reference count each way per send); it joins the queue before anything
        /// else does and before every drain. While it fills, its memory, filled count and end
        /// are `tailBlock`, `tailCount` and `tailEndsStream` (plain values a send updates
        /// without touching the entry), written into the entry when it joins the queue.
        var tail: Entry?
        var tailBlock: UnsafeMutableRawBufferPointer?
        var tailCount = 0
        var tailEndsStream = false

        // The checks below are `mutating` only so that a call gets the state's address: the
        // same checks as non-mutating members, or as functions taking the state, copied all
        // of it first (a reference count for each of its parts, twice per send).

        /// Why the stream takes no more sends, if it does not: its failure, or its end queued.
        mutating func refusal() -> (any Error)? {
            if let failure { return failure }
            return endOfStreamQueued ? StreamBridgeError.notWritable : nil
        }

        /// Whether a send of `count` bytes may be queued now without waiting: the stream is
        /// open, no sender waits before it, and it fits under the bound.
        mutating func hasRoom(for count: Int) -> Bool {
            open && waitingSenders == 0 && bound.engineHeld + bound.queued + count <= bound.limit
        }

        /// Room for a small send of `count` bytes in the block being filled, counted as filled
        /// (the caller writes it at once, under the lock); nil if it has no room, or there is
        /// no such block.
        mutating func tailSpace(for count: Int, endOfStream: Bool) -> UnsafeMutableRawBufferPointer? {
            guard let block = tailBlock, block.count - tailCount >= count else { return nil }
            defer {
                tailCount += count
                tailEndsStream = endOfStream
            }
            return UnsafeMutableRawBufferPointer(rebasing: block[tailCount..<(tailCount + count)])
        }

        /// Starts a new block for small sends, with the first one's `count` bytes written.
        mutating func startTail(_ block: StreamBytes, count: Int, endOfStream: Bool) {
            closeTail()
            tail = Entry(sharedBlock: block, count: count, endOfStream: endOfStream)
            tailBlock = block.base
            tailCount = count
            tailEndsStream = endOfStream
        }

        /// Moves the block being filled into the queue.
        mutating func closeTail() {
            guard var entry = tail.take() else { return }
            entry.count = tailCount
            entry.endOfStream = tailEndsStream
            queue.append(entry)
            tailBlock = nil
        }

        /// The stream's bound: what the engine held unacknowledged when the loop last looked
        /// (`engineHeld`) and the bytes in `queue` it has not taken yet (`queued`). Its senders
        /// wait in `queue` itself, so the budget's own line stays empty.
        var bound: SendBudget<Never>
        /// Entries whose sender waits: while any does, later sends wait behind it.
        var waitingSenders = 0
        /// Bytes handed over now reach the engine at once (a server, or a client once ready).
        var open = false
        var failure: (any Error)?
        var endOfStreamQueued = false
        /// The loop will look at the queue again without being asked: a drain pass is posted,
        /// or the queue waits for engine room (acknowledgements) or for the handshake.
        var drainPending = false
    }

    package let limit: Int
    /// The connection's budget its sends were charged to (nil: none, TLS and TCP).
    package let budget: SharedSendBudget?
    /// Larger sends always wait for the engine to take them: their copy dominates, and letting
    /// bulk senders run ahead made them compete with the loop thread for the CPU (and keep more
    /// fresh buffers alive, paying page faults), which cost bulk goodput on a 2-core machine.
    package static let maxQueuedSend = 64 * 1024
    private let state: Locked<State>

    package init(limit: Int, open: Bool, budget: SharedSendBudget? = nil) {
        self.limit = limit
        self.budget = budget
        state = Locked(State(bound: SendBudget(limit: limit), open: open))
    }

    /// Senders waiting for their bytes to reach the engine.
    package var waitingSenders: Int { state.withLock { $0.waitingSenders } }

    /// Bytes the stream holds against its bound: queued, and held by the engine as last recorded.
    package var heldBytes: Int { state.withLock { $0.bound.held } }

    /// Bytes queued here that the engine has not taken yet.
    package var queuedBytes: Int { state.withLock { $0.bound.queued } }

    // MARK: Application side (any thread)

    /// Queues `bytes` if the stream has room now.
    package func offer(_ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool) -> Offer {
        offer(.owned(bytes), endOfStream: endOfStream, idempotent: idempotent)
    }

    /// Queues `storage` if the stream has room now (`.borrowed` only without a budget).
    package func offer(_ storage: Storage, endOfStream: Bool, idempotent: Bool) -> Offer {
        let count = storage.count
        let offer = state.withLock { state -> Offer in
            if let refusal = state.refusal() { return .failed(refusal) }
            guard count <= Self.maxQueuedSend, state.hasRoom(for: count) else { return .mustWait }
            if count == 0 && !endOfStream { return .accepted(drainNeeded: false) }
            state.closeTail()
            state.queue.append(Entry(storage: storage, endOfStream: endOfStream, idempotent: idempotent, completion: nil))
            return .accepted(drainNeeded: Self.recordQueued(count, endOfStream: endOfStream, in: &state))
        }
        if case .failed = offer { budget?.release(count) }
        return offer
    }

    /// The largest send `offer(count:endOfStream:writing:)` copies into a shared block.
    package static let largestSharedSend = 4 * 1024
    /// The size of a block small sends share: a pooled size class.
    static let sharedBlockSize = 16 * 1024

    /// Queues a small send (at most `largestSharedSend` bytes, on a stream without a budget:
    /// TLS and TCP) if the stream has room now, copying it with `write` into the block earlier
    /// small sends fill, or a fresh one. A burst of small messages then costs no allocation
    /// per message. `write` runs under the outbox's lock and must write all `count` bytes.
    /// `.mustWait` leaves it to the caller to make its own `StreamBytes` and `enqueue` them.
    package func offer(count: Int, endOfStream: Bool, writing write: (UnsafeMutableRawBufferPointer) -> Void) -> Offer {
        precondition(budget == nil && count <= Self.largestSharedSend, "a shared-block send on a budgeted stream, or too large")
        return state.withLock { state -> Offer in
            if let refusal = state.refusal() { return .failed(refusal) }
            guard state.hasRoom(for: count) else { return .mustWait }
            if count == 0 && !endOfStream { return .accepted(drainNeeded: false) }
            if let space = state.tailSpace(for: count, endOfStream: endOfStream) {
                write(space)
            } else {
                let block = StreamBytes(capacity: Self.sharedBlockSize)
                write(UnsafeMutableRawBufferPointer(rebasing: block.base[..<count]))
                state.startTail(block, count: count, endOfStream: endOfStream)
            }
            return .accepted(drainNeeded: Self.recordQueued(count, endOfStream: endOfStream, in: &state))
        }
    }

    /// Counts `count` more queued bytes (and the end, if it is one); true when the caller must
    /// post the drain pass (none is pending yet).
    private static func recordQueued(_ count: Int, endOfStream: Bool, in state: inout State) -> Bool {
        state.bound.queued += count
        state.endOfStreamQueued = endOfStream
        if state.drainPending { return false }
        state.drainPending = true
        return true
    }

    /// Queues `bytes` behind everything queued, for the loop to complete `completion` once the
    /// engine has them all. Returns whether the caller must post a drain pass, or why the
    /// stream takes no more.
    package func enqueue(
        _ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool, completion: Completion<Void>
    ) -> Result<Bool, any Error> {
        enqueue(.owned(bytes), endOfStream: endOfStream, idempotent: idempotent, completion: completion)
    }

    /// `enqueue` for any storage (`.borrowed` only without a budget).
    package func enqueue(
        _ storage: Storage, endOfStream: Bool, idempotent: Bool, completion: Completion<Void>
    ) -> Result<Bool, any Error> {
        let count = storage.count
        let result = state.withLock { state -> Result<Bool, any Error> in
            if let refusal = state.refusal() { return .failure(refusal) }
            state.closeTail()
            state.queue.append(Entry(storage: storage, endOfStream: endOfStream, idempotent: idempotent, completion: completion))
            state.waitingSenders += 1
            return .success(Self.recordQueued(count, endOfStream: endOfStream, in: &state))
        }
        if case .failure = result { budget?.release(count) }
        return result
    }

    // MARK: Loop side

    /// Hands queued entries, oldest first, to `hand`, which gives the engine what it takes of
    /// one entry and returns the new offset (nil: this entry cannot go yet). Stops at the first
    /// entry not taken whole, resumes the senders whose bytes are all with the engine, and
    /// records `unacknowledged()` for the next `offer`. A cancelled waiting send is dropped
    /// unsent. `hand` throwing fails the outbox with its error.
    package func drain(
        _ hand: (_ entry: Entry) throws -> Int?, unacknowledged: () -> Int
    ) {
        var taken = 0, dropped = 0
        let (done, failed, error) = state.withLock { state -> ([Completion<Void>.Claim], [Completion<Void>], (any Error)?) in
            var done: [Completion<Void>.Claim] = []
            state.closeTail()
            while var entry = state.queue.first {
                if let completion = entry.completion, !completion.isPending {
                    state.queue.removeFirst()
                    state.bound.queued -= entry.count - entry.offset
                    dropped += entry.count - entry.offset
                    state.waitingSenders -= 1
                    continue
                }
                let offset: Int?
                do {
                    offset = try hand(entry)
                } catch {
                    state.bound.engineHeld = unacknowledged()
                    dropped += state.bound.queued
                    return (done, Self.fail(&state, error), error)
                }
                guard let offset else { break }
                state.bound.queued -= offset - entry.offset
                taken += offset - entry.offset
                entry.offset = offset
                guard offset == entry.count else {
                    state.queue[state.queue.startIndex] = entry
                    break
                }
                state.queue.removeFirst()
                if let completion = entry.completion {
                    state.waitingSenders -= 1
                    if let claim = completion.claim() { done.append(claim) }
                }
            }
            state.bound.engineHeld = unacknowledged()
            if state.queue.isEmpty { state.drainPending = false }
            return (done, [], nil)
        }
        budget?.handedToEngine(taken)
        budget?.release(dropped)
        for claim in done { claim.resume(.success(())) }
        if let error {
            budget?.failWaiters(of: self, error)
            for waiter in failed { waiter.resume(.failure(error)) }
        }
    }

    /// The loop: the engine now holds `count` bytes unacknowledged (for an engine that lets go
    /// of bytes after a drain recorded them, as TCP's gathered writes do), so `offer` sees room
    /// as soon as it is there rather than at the next drain.
    package func engineHolds(_ count: Int) {
        state.withLock { $0.bound.engineHeld = count }
    }

    /// The loop: bytes handed over from now on reach the engine at once.
    package func open() {
        state.withLock { $0.open = true }
    }

    /// Whether sends are still taken (the stream has neither failed nor queued its end).
    package var takesSends: Bool { state.withLock { $0.failure == nil && !$0.endOfStreamQueued } }

    /// True when nothing is queued (every send handed on, or dropped).
    package var isEmpty: Bool { state.withLock { $0.queue.isEmpty && $0.tail == nil } }

    /// Whether the end of the stream is queued (or already handed on): sends throw
    /// `notWritable` from then on.
    package var isFinished: Bool { state.withLock { $0.endOfStreamQueued } }

    /// The stream takes no more sends (later ones fail with `error`), and the senders still
    /// waiting fail with `error`; what was already accepted (sends that returned) stays queued
    /// for the loop to hand on. For a graceful close: bytes the application was told are sent
    /// are not dropped.
    package func failWaiting(_ error: any Error) {
        var dropped = 0
        let failed = state.withLock { state -> [Completion<Void>] in
            if state.failure == nil { state.failure = error }
            var failed: [Completion<Void>] = []
            var kept = Deque<Entry>()
            state.closeTail()
            for entry in state.queue {
                if let completion = entry.completion {
                    failed.append(completion)
                    state.bound.queued -= entry.count - entry.offset
                    dropped += entry.count - entry.offset
                    state.waitingSenders -= 1
                } else {
                    kept.append(entry)
                }
            }
            state.queue = kept
            if kept.isEmpty { state.drainPending = false }
            return failed
        }
        budget?.release(dropped)
        budget?.failWaiters(of: self, error)
        for waiter in failed { waiter.resume(.failure(error)) }
    }

    /// The stream can send no more: queued bytes are dropped, waiting senders fail with
    /// `waiters` (or `error`), and later sends fail with `error`.
    package func fail(_ error: any Error, waiters: (any Error)? = nil) {
        var dropped = 0
        let failed = state.withLock { state in
            dropped = state.bound.queued
            return Self.fail(&state, error)
        }
        budget?.release(dropped)
        budget?.failWaiters(of: self, waiters ?? error)
        for waiter in failed { waiter.resume(.failure(waiters ?? error)) }
    }

    /// Records the failure and empties the queue; returns the senders that waited.
    private static func fail(_ state: inout State, _ error: any Error) -> [Completion<Void>] {
        if state.failure == nil { state.failure = error }
        let failed = state.queue.compactMap(\.completion)
        state.queue.removeAll()
        state.tail = nil
        state.tailBlock = nil
        state.bound.queued = 0
        state.waitingSenders = 0
        state.drainPending = false
        return failed
    }
}
