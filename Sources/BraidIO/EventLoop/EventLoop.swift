import BraidCore
import CBraidUDP
import Foundation
import HeapModule

#if canImport(Glibc)
import Glibc
#endif

/// One thread running an epoll loop: socket readiness, one timer per registered handler, and
/// work submitted from other threads.
///
/// Hand-written rather than SwiftNIO's loop because the UDP path needs what NIO's datagram
/// channel does not give: sendmmsg/recvmmsg with per-message control data we build and read
/// ourselves (outbound IP_PKTINFO, MSG_TRUNC detection on 64 KiB GRO slots, DF), and exact
/// per-syscall counters that must agree with `perf stat` (reads that end in EAGAIN are
/// invisible through NIO). NIO's datagram handler path also costs ~1.5 us and two allocations
/// per envelope on this machine kind (shared/reference/swift-linux-notes.md).
///
/// ```swift
/// let loop = try EventLoop(name: "io-0")
/// let port = try await loop.submit { context in
///     let socket = try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
///     defer { socket.close() }
///     return socket.localAddress.port
/// }
/// loop.shutdown()
/// ```
public final class EventLoop: Sendable {
    public let name: String
    private let epollFD: Int32
    private let wakeFD: Int32
    private let inbox = Locked<[@Sendable (LoopContext) -> Void]>([])
    private let stopped = Locked<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    private let loopThread = Locked<pthread_t?>(nil)
    /// A virtual loop's clock (nil for a real loop): only `advance(by:)` moves it.
    private let virtualClock: Locked<MonotonicInstant>?
    /// `virtualClock != nil`, kept apart: comparing the optional lock with nil reads the lock's
    /// memory outside the lock while another thread may be taking it (ThreadSanitizer saw
    /// `execute` do that against a driving thread's `virtualNow`).
    package let isVirtual: Bool
    /// A virtual loop's loop-side state, driven by whichever thread calls `runPending` (set
    /// once in `init`, used only while driving).
    nonisolated(unsafe) private var virtualContext: LoopContext?
    /// A real loop's loop-side state (set once on its thread before it runs, read only there).
    nonisolated(unsafe) private var threadContext: LoopContext?

    /// True when called on this loop's thread.
    public var inEventLoop: Bool {
        let current = pthread_self()
        return loopThread.withLock { $0.map { pthread_equal($0, current) != 0 } ?? false }
    }

    /// The loop's context when called on its thread (nil elsewhere): work that may run either
    /// on the loop or off it does on the loop at once what it would otherwise post.
    package var currentContext: LoopContext? {
        guard inEventLoop else { return nil }
        return isVirtual ? virtualContext : threadContext
    }

    public init(name: String = "braid-io") throws {
        self.name = name
        virtualClock = nil
        isVirtual = false
        (epollFD, wakeFD) = try Self.makeDescriptors(watchingWakeUps: true)
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            loopThread.withLock { $0 = pthread_self() }
            started.signal()
            let context = LoopContext(loop: self, epollFD: epollFD, wakeFD: wakeFD)
            threadContext = context
            context.run()
            context.tearDown()
            threadContext = nil
            // The eventfd stays open until the loop is released (deinit): a late `execute` (a
            // connection released after its loop stopped) then writes to this loop's own
            // eventfd, never to a descriptor number the process has since reused.
            close(epollFD)
            exited.signal()
        }
        thread.name = name
        thread.start()
        started.wait()
    }

    /// A loop on virtual time, without a thread: the test that makes it drives it with
    /// `runPending()` and `advance(by:)`, so code that runs on loops (connection owners, their
    /// timers, the async calls that wait on them) is tested deterministically, without sockets
    /// or a wall clock. Registering a socket works, but nothing ever polls it.
    package init(virtualTimeStartingAt start: MonotonicInstant, name: String = "braid-virtual") throws {
        self.name = name
        virtualClock = Locked(start)
        isVirtual = true
        // Nobody waits on a virtual loop's epoll, so it needs no wake-ups.
        (epollFD, wakeFD) = try Self.makeDescriptors(watchingWakeUps: false)
        virtualContext = LoopContext(loop: self, epollFD: epollFD, wakeFD: wakeFD)
    }

    /// The loop's epoll instance and the eventfd that wakes it (watched by it, or not).
    private static func makeDescriptors(watchingWakeUps: Bool) throws -> (epoll: Int32, wake: Int32) {
        let epoll = braid_epoll_create()
        guard epoll >= 0 else { throw DatapathError.system("epoll_create1", errno) }
        let wake = braid_eventfd()
        guard wake >= 0 else {
            close(epoll)
            throw DatapathError.system("eventfd", errno)
        }
        guard !watchingWakeUps || braid_epoll_ctl(epoll, BRAID_EPOLL_CTL_ADD, wake, UInt32(BRAID_EPOLL_IN), LoopContext.wakeToken) == 0 else {
            let error = errno
            close(wake)
            close(epoll)
            throw DatapathError.system("epoll_ctl(eventfd)", error)
        }
        return (epoll, wake)
    }

    deinit {
        // A real loop's thread keeps it alive while it runs; its eventfd closes here. A
        // virtual loop that nobody shut down still gives its descriptors back.
        if !isVirtual {
            close(wakeFD)
        } else if virtualContext != nil {
            close(wakeFD)
            close(epollFD)
        }
    }

    /// `shutdown()` was called: work posted now never runs.
    package var isStopped: Bool { stopped.withLock { $0 } }

    /// A virtual loop's clock now (nil for a real loop).
    package var virtualNow: MonotonicInstant? { virtualClock?.withLock { $0 } }

    /// A virtual loop: runs the work posted to it, the work that work defers and the timers
    /// due now, until none is left. The calling thread is the loop's meanwhile.
    package func runPending() {
        guard let context = virtualContext else { preconditionFailure("runPending drives a virtual loop only") }
        loopThread.withLock { $0 = pthread_self() }
        defer { loopThread.withLock { $0 = nil } }
        context.runPendingWork()
    }

    /// A virtual loop: moves the clock `duration` forward, running in order everything that
    /// falls due on the way.
    package func advance(by duration: Duration) {
        guard let context = virtualContext, let start = virtualNow else { preconditionFailure("advance drives a virtual loop only") }
        let target = start + duration
        runPending()
        while let next = context.nextDeadline, next <= target {
            virtualClock?.withLock { $0 = max($0, next) }
            runPending()
        }
        virtualClock?.withLock { $0 = target }
        runPending()
    }

    /// Runs `work` on the loop thread.
    public func execute(_ work: @escaping @Sendable (LoopContext) -> Void) {
        // Only the first work item of a batch wakes the loop: the loop reads the eventfd
        // before it takes the inbox, so items added meanwhile are taken in the same pass.
        let wasEmpty = inbox.withLock { inbox in
            defer { inbox.append(work) }
            return inbox.isEmpty
        }
        // Work posted on the loop's own thread (a task the loop runs, resuming another) needs
        // no wake-up: the loop looks at its inbox before it waits again.
        guard wasEmpty, !isVirtual, !inEventLoop else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Runs `work` on the loop thread and returns its result.
    public func submit<T: Sendable>(_ work: @escaping @Sendable (LoopContext) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            execute { context in continuation.resume(with: Result { try work(context) }) }
        }
    }

    /// Starts something on the loop that finishes later: `start` sets it up (its handlers keep
    /// their state on the loop) and calls `finish` once, from the loop, with the outcome.
    /// Fails with `DatapathError.timedOut` if `finish` is not called within `timeout`.
    public func run<T: Sendable>(
        timeout: Duration,
        _ start: @escaping @Sendable (LoopContext, _ finish: @escaping (Result<T, any Error>) -> Void) throws -> Void
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            execute { context in
                let once = OneShot(continuation)
                let timer = DeadlineHandler { _ in once.resume(.failure(DatapathError.timedOut(timeout))) }
                let token = context.registerTimer(timer)
                context.setTimer(token, at: context.now + timeout)
                let finish: (Result<T, any Error>) -> Void = { result in
                    context.deregister(token)
                    once.resume(result)
                }
                do { try start(context, finish) } catch { finish(.failure(error)) }
            }
        }
    }

    /// Closes every registered handler, stops the thread and waits for it to exit.
    public func shutdown() {
        if let virtualContext {
            // No thread to stop: close what is registered, as a real loop does on its way out.
            loopThread.withLock { $0 = pthread_self() }
            virtualContext.tearDown()
            loopThread.withLock { $0 = nil }
            self.virtualContext = nil
            close(wakeFD)
            close(epollFD)
            return
        }
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        execute { $0.stopRequested = true }
        exited.wait()
    }

    fileprivate var hasPostedWork: Bool { inbox.withLock { !$0.isEmpty } }

    fileprivate func takeInbox() -> [@Sendable (LoopContext) -> Void] {
        inbox.withLock { work in
            defer { work.removeAll(keepingCapacity: true) }
            return work
        }
    }
}

/// Resumes a continuation at most once.
private final class OneShot<T: Sendable> {
    private var continuation: CheckedContinuation<T, any Error>?
    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = continuation }
    func resume(_ result: Result<T, any Error>) {
        continuation?.resume(with: result)
        continuation = nil
    }
}

/// A timer-only handler that runs a closure when it fires.
private final class DeadlineHandler: LoopHandler {
    let fired: (LoopContext) -> Void
    init(_ fired: @escaping (LoopContext) -> Void) { self.fired = fired }
    func readable(_ context: LoopContext) {}
    func writable(_ context: LoopContext) {}
    func close(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) { fired(context) }
}

/// What runs on a loop: told when its socket is readable or writable and when its timer fires.
public protocol LoopHandler: AnyObject {
    func readable(_ context: LoopContext)
    func writable(_ context: LoopContext)
    func timerFired(_ context: LoopContext)
    /// The loop is shutting down: release sockets and resources.
    func close(_ context: LoopContext)
}

/// The loop thread's own state. Only code running on the loop sees it (it is handed to the
/// closures given to `EventLoop.execute`), which is why it need not be Sendable.
public final class LoopContext {
    public unowned let loop: EventLoop
    fileprivate static let wakeToken: UInt64 = .max
    private let epollFD: Int32
    private let wakeFD: Int32
    fileprivate var stopRequested = false

    private struct Registration {
        var handler: LoopHandler
        var fd: Int32
        var timerGeneration: UInt64 = 0
        var wantsReadable = true
        var wantsWritable = false
        /// False while the descriptor is out of the epoll set (no interest at all).
        var watched = true

        var events: UInt32 { (wantsReadable ? UInt32(BRAID_EPOLL_IN) : 0) | (wantsWritable ? UInt32(BRAID_EPOLL_OUT) : 0) }
    }

    private struct TimerEntry: Comparable {
        var deadline: MonotonicInstant
        var token: UInt64
        var generation: UInt64
        static func < (a: Self, b: Self) -> Bool { a.deadline < b.deadline }
    }

    private var registrations: [UInt64: Registration] = [:]
    private var nextToken: UInt64 = 1
    private var timers = Heap<TimerEntry>()
    /// Work queued by loop code for right after the current handler returns.
    private var deferred: [(LoopContext) -> Void] = []
    /// Work queued for once everything ready in this pass has been handled.
    private var endOfPass: [(LoopContext) -> Void] = []
    /// Memory a handler may read a socket into and copy out of before it returns: one per
    /// loop, so an idle connection holds no read buffer of its own.
    package let readScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    private let readyTokens = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: 64)
    private let readyEvents = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 64)

    fileprivate init(loop: EventLoop, epollFD: Int32, wakeFD: Int32) {
        self.loop = loop
        self.epollFD = epollFD
        self.wakeFD = wakeFD
    }

    deinit {
        readScratch.deallocate()
        readyTokens.deallocate()
        readyEvents.deallocate()
    }

    /// The monotonic clock the loop's timers and the engines run on.
    public var now: MonotonicInstant { loop.virtualNow ?? monotonicNow() }

    /// Watches `fd` for readability (and writability on request); returns the handler's token.
    public func register(_ handler: LoopHandler, fd: Int32) throws -> UInt64 {
        let token = nextToken
        nextToken += 1
        guard braid_epoll_ctl(epollFD, BRAID_EPOLL_CTL_ADD, fd, UInt32(BRAID_EPOLL_IN), token) == 0 else {
            throw DatapathError.system("epoll_ctl(ADD)", errno)
        }
        registrations[token] = Registration(handler: handler, fd: fd)
        return token
    }

    /// Gives the registration `token` (its descriptor, interests and timer) to another handler.
    public func replaceHandler(_ token: UInt64, with handler: LoopHandler) {
        registrations[token]?.handler = handler
    }

    /// A handler with a timer and no file descriptor (e.g. one server connection).
    public func registerTimer(_ handler: LoopHandler) -> UInt64 {
        let token = nextToken
        nextToken += 1
        registrations[token] = Registration(handler: handler, fd: -1)
        return token
    }

    /// Handlers whose socket buffer filled up ask to hear when it drains. Independent of
    /// `setWantsReadable`: the two interests combine.
    public func setWantsWritable(_ token: UInt64, _ wants: Bool) {
        guard var registration = registrations[token], registration.wantsWritable != wants else { return }
        registration.wantsWritable = wants
        updateInterest(token, &registration)
    }

    /// Turns the handler's interest in readability off or on (it is on from `register`). A
    /// byte-stream owner whose application stopped reading turns it off, so the loop stops
    /// reading the socket and TCP's window stops the peer. The loop is level-triggered: data
    /// already waiting is reported again as soon as the interest is back on.
    ///
    /// epoll reports errors and hang-ups whatever the interest; with only writability wanted
    /// they reach the handler as `writable` (where a write reports the failure), and with
    /// neither interest the descriptor leaves the epoll set, so a dead socket whose owner
    /// waits for nothing cannot make the loop spin.
    public func setWantsReadable(_ token: UInt64, _ wants: Bool) {
        guard var registration = registrations[token], registration.wantsReadable != wants else { return }
        registration.wantsReadable = wants
        updateInterest(token, &registration)
    }

    /// Whether the handler wants readability (nil for an unknown token).
    public func wantsReadable(_ token: UInt64) -> Bool? { registrations[token]?.wantsReadable }

    /// Whether the handler wants writability (nil for an unknown token).
    public func wantsWritable(_ token: UInt64) -> Bool? { registrations[token]?.wantsWritable }

    /// Records the interest and tells epoll (a handler without a descriptor only records it:
    /// an in-memory socket reads it back with `wantsReadable` / `wantsWritable`).
    private func updateInterest(_ token: UInt64, _ registration: inout Registration) {
        let events = registration.events
        if registration.fd < 0 {
            // Nothing to tell epoll.
        } else if events == 0 {
            if registration.watched { _ = braid_epoll_ctl(epollFD, BRAID_EPOLL_CTL_DEL, registration.fd, 0, token) }
            registration.watched = false
        } else if registration.watched {
            _ = braid_epoll_ctl(epollFD, BRAID_EPOLL_CTL_MOD, registration.fd, events, token)
        } else {
            _ = braid_epoll_ctl(epollFD, BRAID_EPOLL_CTL_ADD, registration.fd, events, token)
            registration.watched = true
        }
        registrations[token] = registration
    }

    /// Sets the handler's single timer (replacing any earlier one); nil cancels it.
    public func setTimer(_ token: UInt64, at deadline: MonotonicInstant?) {
        guard var registration = registrations[token] else { return }
        registration.timerGeneration += 1
        registrations[token] = registration
        if let deadline {
            timers.insert(TimerEntry(deadline: deadline, token: token, generation: registration.timerGeneration))
        }
    }

    /// Runs `work` on this loop once the handler now running has returned (before the loop
    /// waits again). For work that must not run inside an event callback; unlike
    /// `EventLoop.execute` it takes loop-bound (non-Sendable) state.
    public func afterCurrentEvent(_ work: @escaping (LoopContext) -> Void) {
        deferred.append(work)
    }

    /// Runs `work` once this pass of the loop has handled everything that was ready (posted
    /// work, sockets, timers), before the loop waits again: the place for a write that several
    /// handlers of one pass ask for, so it happens once.
    public func atEndOfPass(_ work: @escaping (LoopContext) -> Void) {
        endOfPass.append(work)
    }

    private func runEndOfPass() {
        while !endOfPass.isEmpty {
            let batch = endOfPass
            endOfPass.removeAll()
            for work in batch {
                work(self)
                runDeferred()
            }
        }
    }

    private func runDeferred() {
        while !deferred.isEmpty {
            let batch = deferred
            deferred.removeAll()
            for work in batch { work(self) }
        }
    }

    /// Runs `work` once on this loop at `deadline`, unless `deregister` with the returned token
    /// cancels it first.
    @discardableResult
    public func schedule(at deadline: MonotonicInstant, _ work: @escaping (LoopContext) -> Void) -> UInt64 {
        var token: UInt64 = 0
        let handler = DeadlineHandler { context in
            context.deregister(token)
            work(context)
        }
        token = registerTimer(handler)
        setTimer(token, at: deadline)
        return token
    }

    public func deregister(_ token: UInt64) {
        guard let registration = registrations.removeValue(forKey: token), registration.fd >= 0, registration.watched else { return }
        _ = braid_epoll_ctl(epollFD, BRAID_EPOLL_CTL_DEL, registration.fd, 0, token)
    }

    fileprivate func run() {
        while !stopRequested {
            // Work the loop's own thread posted (without waking it) runs in this pass, after
            // a look at the sockets that does not wait.
            let posted = loop.hasPostedWork
            let timeout = posted ? 0 : nextTimeout()
            let count = braid_epoll_wait(epollFD, readyTokens.baseAddress, readyEvents.baseAddress, 64, timeout)
            if count < 0 && errno != EINTR { fatalError("epoll_wait failed: \(String(cString: strerror(errno)))") }
            if posted {
                for work in loop.takeInbox() {
                    work(self)
                    runDeferred()
                }
            }
            for index in 0..<max(Int(count), 0) {
                let token = readyTokens[index]
                if token == Self.wakeToken {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    for work in loop.takeInbox() {
                        work(self)
                        runDeferred()
                    }
                    continue
                }
                let events = readyEvents[index]
                let failure = events & UInt32(BRAID_EPOLL_ERR | BRAID_EPOLL_HUP) != 0
                if let registration = registrations[token],
                    events & UInt32(BRAID_EPOLL_OUT) != 0 || (failure && !registration.wantsReadable)
                {
                    registration.handler.writable(self)
                    runDeferred()
                }
                // Looked up again: the writable handler may have changed the interest or left.
                if let registration = registrations[token], registration.wantsReadable,
                    events & UInt32(BRAID_EPOLL_IN) != 0 || failure
                {
                    registration.handler.readable(self)
                    runDeferred()
                }
            }
            fireDueTimers()
            runEndOfPass()
        }
    }

    private func nextTimeout() -> Int64 {
        // Drop cancelled entries from the top so they do not cause early wake-ups.
        while let top = timers.min, registrations[top.token]?.timerGeneration != top.generation {
            _ = timers.popMin()
        }
        guard let top = timers.min else { return -1 }
        let now = self.now
        // Clamped: a deadline beyond Int64 nanoseconds (an engine timer gone far into the
        // future) means "not soon", never a trap.
        return top.deadline > now ? Int64(clamping: top.deadline.nanoseconds - now.nanoseconds) : 0
    }

    private func fireDueTimers() {
        let now = self.now
        while let top = timers.min, top.deadline <= now {
            _ = timers.popMin()
            guard let registration = registrations[top.token], registration.timerGeneration == top.generation else { continue }
            registration.handler.timerFired(self)
            runDeferred()
        }
    }

    /// A virtual loop: posted work, deferred work and due timers until none is left.
    fileprivate func runPendingWork() {
        while true {
            let work = loop.takeInbox()
            for item in work {
                item(self)
                runDeferred()
            }
            fireDueTimers()
            runEndOfPass()
            guard !loop.hasPostedWork else { continue }
            guard let next = nextDeadline, next <= now else { return }
        }
    }

    /// The earliest live timer's deadline.
    fileprivate var nextDeadline: MonotonicInstant? {
        while let top = timers.min, registrations[top.token]?.timerGeneration != top.generation {
            _ = timers.popMin()
        }
        return timers.min?.deadline
    }

    fileprivate func tearDown() {
        for work in loop.takeInbox() { work(self) }
        // Taken out first: a handler's close (or the deinit of what it releases) may deregister.
        let closing = registrations
        registrations.removeAll()
        for registration in closing.values where registration.fd >= 0 { registration.handler.close(self) }
    }
}

/// CLOCK_MONOTONIC, the clock the loops, timers and engines run on.
public func monotonicNow() -> MonotonicInstant { .now() }

/// A value that belongs to one loop's thread, passed around as Sendable and unwrapped only on
/// that thread (checked at run time): how loop-owned objects such as drivers travel through
/// `submit` and come back to their loop.
public struct LoopBound<Value>: @unchecked Sendable {
    private let stored: Value
    public let loop: EventLoop

    public init(_ value: Value, on loop: EventLoop) {
        precondition(loop.inEventLoop, "LoopBound created off its loop")
        stored = value
        self.loop = loop
    }

    /// Hands a value created off the loop, and referenced nowhere else yet, to `loop`: from now
    /// on only that loop's thread may use it.
    public init(handingOver value: Value, to loop: EventLoop) {
        stored = value
        self.loop = loop
    }

    public var value: Value {
        precondition(loop.inEventLoop, "LoopBound used off its loop")
        return stored
    }
}
