import BraidCore
import DequeModule
import Foundation

/// Received datagrams waiting for a reader (QUIC's RFC 9221 payloads: `DatagramInbox`, a
/// `MessageInbox<Data>`; UDP's datagrams with their metadata).
///
/// The loop appends under a lock and wakes a reader only if one is suspended; a reader takes
/// everything queued at once and hands it out one by one without the lock. Under load that is
/// one lock round and at most one task wake-up per batch the socket delivered, instead of one
/// each (as a per-element `AsyncStream` costs).
package final class MessageInbox<Element: Sendable>: Sendable {
    private struct State {
        var queue = Deque<Element>()
        var readers: [Completion<Void>] = []
        var finished = false
        /// Datagrams dropped beyond the backlog or the byte limit.
        var dropped = 0
        /// What `measure` makes of the queued datagrams (0 without one).
        var heldBytes = 0
        /// What `measure` made of the datagrams readers took.
        var bytesTaken: UInt64 = 0
    }

    /// Unread datagrams beyond this many are dropped, oldest first (they are unreliable
    /// anyway, and an idle reader must not grow memory without bound).
    package let backlog: Int
    /// Unread bytes (as `measure` counts them) beyond this are dropped too, oldest first, so
    /// a peer sending large datagrams cannot make `backlog` of them a large figure (nil: no
    /// limit but the backlog's).
    package let byteLimit: Int?
    private let state = Locked(State())
    /// The bytes a queued datagram holds, for `heldBytes` (nil: not measured).
    private let measure: (@Sendable (Element) -> Int)?

    /// An inbox of at most `backlog` unread datagrams; with `measure`, it keeps the bytes they
    /// hold (`heldBytes`, `bytesTaken`: a listener's buffer limit counts them) and, with
    /// `byteLimit` too, holds at most that many of them.
    package init(backlog: Int, byteLimit: Int? = nil, measure: (@Sendable (Element) -> Int)? = nil) {
        precondition(byteLimit == nil || measure != nil, "a byte limit needs a measure")
        self.backlog = backlog
        self.byteLimit = byteLimit
        self.measure = measure
    }

    /// What `measure` makes of the datagrams queued now (0 without one).
    package var heldBytes: Int { state.withLock { $0.heldBytes } }

    /// What `measure` made of the datagrams readers took so far.
    package var bytesTaken: UInt64 { state.withLock { $0.bytesTaken } }

    /// The measured bytes of `datagrams` (0 without a measure).
    private func measured(_ datagrams: some Collection<Element>) -> Int {
        guard let measure else { return 0 }
        var total = 0
        for datagram in datagrams { total += measure(datagram) }
        return total
    }

    /// Drops the oldest datagrams beyond `backlog`, then the oldest while the rest hold more
    /// than `byteLimit` (under the lock).
    private func dropExcess(_ state: inout State) {
        let excess = state.queue.count - backlog
        if excess > 0 {
            if measure != nil { state.heldBytes -= measured(state.queue.prefix(excess)) }
            state.queue.removeFirst(excess)
            state.dropped += excess
        }
        guard let byteLimit, let measure, state.heldBytes > byteLimit else { return }
        while state.heldBytes > byteLimit, let oldest = state.queue.popFirst() {
            state.heldBytes -= measure(oldest)
            state.dropped += 1
        }
    }

    /// Datagrams queued and not yet taken by a reader.
    package var count: Int { state.withLock { $0.queue.count } }

    /// Datagrams dropped so far because `backlog` of them, or `byteLimit` bytes, were unread.
    package var droppedCount: Int { state.withLock { $0.dropped } }

    /// Loop: one datagram arrived. Specialized here for the element types of the channels in
    /// other modules (QUIC's `Data`, UDP's `ReceivedDatagram`): a generic call per datagram from
    /// another module runs the unspecialized body, with its metadata lookups.
    @_specialize(exported: true, where Element == Data)
    @_specialize(exported: true, where Element == ReceivedDatagram)
    package func deliver(_ datagram: Element) {
        deliver(contentsOf: CollectionOfOne(datagram))
    }

    /// Loop: several datagrams arrived (one socket read's worth), in a deque the caller hands
    /// over: with nothing queued, the inbox takes the deque whole (no copy of each datagram) and
    /// gives back its own, emptied with its room kept, for the next read's. One lock round and
    /// at most one wake-up for all of them.
    package func deliver(moving datagrams: inout Deque<Element>) {
        guard !datagrams.isEmpty else { return }
        let bytes = measured(datagrams)
        let readers = state.withLock { state -> [Completion<Void>] in
            guard !state.finished else { return [] }
            if state.queue.isEmpty {
                swap(&state.queue, &datagrams)
            } else {
                state.queue.append(contentsOf: datagrams)
            }
            state.heldBytes += bytes
            dropExcess(&state)
            defer { state.readers.removeAll() }
            return state.readers
        }
        // Outside the lock: what was copied (or refused once finished) is released here.
        datagrams.removeAll(keepingCapacity: true)
        for reader in readers { reader.resume(.success(())) }
    }

    /// Loop: several datagrams arrived (one socket read's worth): one lock round and at most one
    /// wake-up for all of them.
    package func deliver(contentsOf datagrams: some Collection<Element>) {
        guard !datagrams.isEmpty else { return }
        let bytes = measured(datagrams)
        let readers = state.withLock { state -> [Completion<Void>] in
            guard !state.finished else { return [] }
            state.queue.append(contentsOf: datagrams)
            state.heldBytes += bytes
            dropExcess(&state)
            defer { state.readers.removeAll() }
            return state.readers
        }
        for reader in readers { reader.resume(.success(())) }
    }

    /// Loop: no more datagrams will arrive; readers get what is queued, then the end.
    @_specialize(exported: true, where Element == Data)
    @_specialize(exported: true, where Element == ReceivedDatagram)
    package func finish() {
        let readers = state.withLock { state -> [Completion<Void>] in
            state.finished = true
            defer { state.readers.removeAll() }
            return state.readers
        }
        for reader in readers { reader.resume(.success(())) }
    }

    /// Everything queued, oldest first, waiting for at least one; empty once finished and
    /// drained. Throws `CancellationError` if the task is cancelled while it waits.
    @_specialize(exported: true, where Element == Data)
    @_specialize(exported: true, where Element == ReceivedDatagram)
    package func takeAll() async throws -> Deque<Element> {
        var taken = Deque<Element>()
        try await takeAll(swappingWith: &taken)
        return taken
    }

    /// `takeAll()` into `items`, whose storage (emptied, its room kept) the inbox keeps for
    /// what arrives next: a reader and the loop pass the same few buffers back and forth
    /// instead of growing a new one for every batch. They hold at most the most datagrams
    /// ever queued at once, which `backlog` bounds.
    @_specialize(exported: true, where Element == Data)
    @_specialize(exported: true, where Element == ReceivedDatagram)
    package func takeAll(swappingWith items: inout Deque<Element>) async throws {
        items.removeAll(keepingCapacity: true)
        while true {
            let taken = state.withLock { state -> Bool in
                guard state.queue.isEmpty, !state.finished else {
                    swap(&state.queue, &items)
                    state.bytesTaken &+= UInt64(state.heldBytes)
                    state.heldBytes = 0
                    return true
                }
                return false
            }
            if taken { return }
            try await waitForArrival()
        }
    }

    /// The oldest datagram, waiting for one; nil once finished and drained. Throws
    /// `CancellationError` if the task is cancelled while it waits.
    package func takeFirst() async throws -> Element? {
        while true {
            let taken = state.withLock { state -> Element?? in
                if let first = state.queue.popFirst() {
                    if let measure {
                        let bytes = measure(first)
                        state.heldBytes -= bytes
                        state.bytesTaken &+= UInt64(bytes)
                    }
                    return .some(first)
                }
                return state.finished ? .some(nil) : nil
            }
            if let taken { return taken }
            try await waitForArrival()
        }
    }

    /// Suspends until a datagram is queued or the inbox finishes (at once if either holds).
    private func waitForArrival() async throws {
        try await Completion<Void>.wait { reader in
            let ready = state.withLock { state in
                guard state.queue.isEmpty, !state.finished else { return true }
                state.readers.removeAll { !$0.isPending }
                state.readers.append(reader)
                return false
            }
            if ready { reader.resume(.success(())) }
        }
    }

    /// Loop: drops every queued datagram (the connection was closed for holding too much);
    /// readers then see the end at once.
    package func discardQueued() {
        let dropped = state.withLock { state -> Deque<Element> in
            var dropped = Deque<Element>()
            swap(&state.queue, &dropped)
            state.heldBytes = 0
            return dropped
        }
        // Released outside the lock.
        _ = dropped
    }

    /// Puts datagrams a reader took but never handed out back at the front, in order.
    package func putBack(_ datagrams: some Collection<Element>) {
        guard !datagrams.isEmpty else { return }
        let bytes = measured(datagrams)
        let readers = state.withLock { state -> [Completion<Void>] in
            state.queue.insert(contentsOf: datagrams, at: 0)
            // Taken and given back: no longer counted as read.
            state.heldBytes += bytes
            state.bytesTaken &-= UInt64(bytes)
            dropExcess(&state)
            defer { state.readers.removeAll() }
            return state.readers
        }
        for reader in readers { reader.resume(.success(())) }
    }
}
