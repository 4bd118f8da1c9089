import BraidCore

/// One loop's signal that the kernel's links, addresses or routes changed: what a connection
/// `waiting` for a path listens to, so it retries as soon as a path may have appeared instead
/// of at its next backoff timer.
///
/// Made on first use on each loop, on the loop's own thread, so it watches the network
/// namespace of that thread (a test's loop may have entered another). It keeps one rtnetlink
/// socket (no snapshots: no /sys reads) for the loop's life and makes no system calls while
/// nothing changes. Virtual loops have none: nothing polls their sockets.
package final class InterfaceChanges {
    /// Counts the kernel's event batches (and the end of the first dump): a waiter that
    /// remembers it can tell whether anything happened since.
    package private(set) var generation: UInt64 = 0
    private var waiters: [UInt64: (LoopContext) -> Void] = [:]
    private var nextToken: UInt64 = 0
    private var watcher: InterfaceWatcher.Handle?
    /// The watcher's counters (tests read them).
    package let counters = InterfaceWatcher.Counters()

    private struct Entry: Sendable {
        weak var loop: EventLoop?
        /// nil: the loop cannot have one (virtual, or the kernel refused the socket).
        var changes: LoopBound<InterfaceChanges>?
    }

    private static let perLoop = Locked<[ObjectIdentifier: Entry]>([:])

    private init() {}

    /// The loop's signal, made on first use unless `creating` is false; nil on a virtual loop
    /// or where the kernel refuses a netlink socket (waiting then relies on its timer alone).
    /// Call on the loop.
    package static func on(_ context: LoopContext, creating: Bool = true) -> InterfaceChanges? {
        let loop = context.loop
        let key = ObjectIdentifier(loop)
        // The weak reference tells a live entry from one left by a loop that is gone and
        // whose address a new loop reuses.
        if let entry = perLoop.withLock({ $0[key] }), entry.loop === loop { return entry.changes?.value }
        guard creating else { return nil }
        var made: InterfaceChanges?
        if loop.virtualNow == nil, let socket = try? RouteNetlinkSocket() {
            let changes = InterfaceChanges()
            let bound = LoopBound(changes, on: loop)
            changes.watcher = InterfaceWatcher.start(
                socket: socket, on: loop, counters: changes.counters, publish: nil,
                kernelEvents: { bound.value.changed() },
                fail: { _ in bound.value.watcherFailed() })
            made = changes
        }
        perLoop.withLock { entries in
            // Entries of loops that are gone go too (their watchers closed with the loop).
            entries = entries.filter { $0.value.loop != nil }
            entries[key] = Entry(loop: loop, changes: made.map { LoopBound($0, on: loop) })
        }
        return made
    }

    /// Runs `body` once, on the loop, after the next change; returns a token for `cancel`.
    package func whenChanged(_ body: @escaping (LoopContext) -> Void) -> UInt64 {
        nextToken += 1
        waiters[nextToken] = body
        return nextToken
    }

    package func cancel(_ token: UInt64) {
        waiters.removeValue(forKey: token)
    }

    /// Whether the watcher still runs (false once the kernel failed it).
    package var isWatching: Bool { watcher != nil }

    /// The loop's interfaces now, for a connection that must choose one (its interface
    /// parameters); nil until the first dumps are done (`whenChanged` tells when) or once the
    /// watcher failed. Reads /sys for links not classified yet.
    package var snapshot: InterfaceSnapshot? { watcher?.currentSnapshot() }

    /// Wakes every loop's waiters at once, as if the kernel had sent an event: what counts as
    /// an allowed interface changed without one (`NetworkInterfacePolicy`'s marks).
    package static func wakeAll() {
        let live = perLoop.withLock { entries in entries.values.compactMap { $0.changes }.filter { !$0.loop.isStopped } }
        for changes in live {
            changes.loop.execute { context in changes.value.wake(context) }
        }
    }

    /// The kernel failed the watcher: waiters must not wait for events that will not come
    /// (they find `isWatching` false and fall back to their timers).
    private func watcherFailed() {
        let loop = watcher?.loop
        watcher = nil
        guard !waiters.isEmpty, let loop else { return }
        let bound = LoopBound(self, on: loop)
        loop.execute { context in bound.value.wake(context) }
    }

    private func changed() {
        generation += 1
        guard !waiters.isEmpty, let loop = watcher?.loop else { return }
        // After the netlink read that brought the event, not inside it: a waiter may start
        // connection attempts.
        let bound = LoopBound(self, on: loop)
        loop.execute { context in bound.value.wake(context) }
    }

    private func wake(_ context: LoopContext) {
        let woken = waiters
        waiters.removeAll()
        for (_, body) in woken.sorted(by: { $0.key < $1.key }) { body(context) }
    }
}
