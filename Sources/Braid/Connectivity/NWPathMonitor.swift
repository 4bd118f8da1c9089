import BraidCore
import BraidIO
import Dispatch
import Synchronization

/// Watches the machine's network and reports each change as an `NWPath`, with
/// Network.framework's names: `pathUpdateHandler` with `start(queue:)` and `cancel()`,
/// `currentPath`, and `for await path in monitor`.
///
/// Use it for policy and for telling the user, never as a pre-flight check before connecting:
/// start the connection and react to `waiting`.
///
/// ```swift
/// let monitor = NWPathMonitor()
/// monitor.pathUpdateHandler = { path in
///     if path.status == .satisfied {
///         print("online", path.isExpensive ? "(expensive)" : "")
///     } else {
///         print("offline")
///     }
/// }
/// monitor.start(queue: DispatchQueue(label: "network-monitor"))
/// // ...
/// monitor.cancel()
/// ```
///
/// On Linux the monitor reads the kernel's links, addresses and default routes over rtnetlink
/// on one of Braid's event loops: one dump when it starts, then only the kernel's events, so
/// while nothing changes it makes no system calls. A path is satisfied when an allowed
/// interface is up and running with an address and a default route (the rules:
/// `NWPath`, and the "Paths, interfaces and migration" article). Interface types come from the
/// kernel: loopback; Wi-Fi (a wireless device); cellular (a WWAN device); wired Ethernet (an
/// Ethernet device with hardware behind it); other (veth, bridges, VLANs, tunnels, VPNs).
/// Cellular is expensive; other interfaces are expensive or constrained when marked with
/// `NetworkInterfacePolicy`.
///
/// The monitor's rtnetlink socket is made by `start(queue:)`, so it watches the network
/// namespace of the thread that starts it. If the kernel refuses the socket (a sandbox
/// without netlink), the monitor reports one unsatisfied path that says so.
public final class NWPathMonitor: Sendable {
    private let requiredInterfaceType: NWInterface.InterfaceType?
    private let prohibitedInterfaceTypes: [NWInterface.InterfaceType]
    private let state = Locked(State())
    /// The watcher's system calls and messages (tests read them).
    let counters = InterfaceWatcher.Counters()

    fileprivate struct State {
        var handler: (@Sendable (NWPath) -> Void)?
        var queue: DispatchQueue?
        var path = PathEvaluation.notStarted
        /// A path has been handed out since `start`.
        var delivered = false
        var started = false
        var cancelled = false
        var watcher: InterfaceWatcher.Handle?
        var snapshot: InterfaceSnapshot?
        var streams: [Int: AsyncStream<NWPath>.Continuation] = [:]
        var nextStream = 0
    }

    /// A monitor of every interface type but loopback.
    public init() {
        requiredInterfaceType = nil
        prohibitedInterfaceTypes = []
    }

    /// A monitor of interfaces of one type only (`.loopback` included).
    public init(requiredInterfaceType: NWInterface.InterfaceType) {
        self.requiredInterfaceType = requiredInterfaceType
        prohibitedInterfaceTypes = []
    }

    /// A monitor of every interface type but loopback and `prohibitedInterfaceTypes`.
    public init(prohibitedInterfaceTypes: [NWInterface.InterfaceType]) {
        requiredInterfaceType = nil
        self.prohibitedInterfaceTypes = prohibitedInterfaceTypes
    }

    deinit {
        let (watcher, streams) = state.withLock { state in
            state.cancelled = true
            return (state.watcher, Array(state.streams.values))
        }
        watcher?.cancel()
        for stream in streams { stream.finish() }
        Self.live.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    /// The latest path: before `start`, an unsatisfied one.
    public var currentPath: NWPath { state.withLock { $0.path } }

    /// Called on the start queue with the first path once the monitor has read the kernel's
    /// interfaces, then with every path that differs from the one before.
    @preconcurrency public var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// The queue given to `start(queue:)`.
    public var queue: DispatchQueue? { state.withLock { $0.queue } }

    /// Starts watching; updates go to `pathUpdateHandler` on `queue`. A second call, or a
    /// call after `cancel()`, does nothing.
    public func start(queue: DispatchQueue) {
        let first = state.withLock { state in
            guard !state.started, !state.cancelled else { return false }
            state.started = true
            state.queue = queue
            return true
        }
        guard first else { return }
        let watcher: InterfaceWatcher.Handle
        do {
            // Made here, on the caller's thread: the socket watches this thread's network
            // namespace, whichever loop reads it.
            let socket = try RouteNetlinkSocket()
            watcher = InterfaceWatcher.start(
                socket: socket, on: LoopPool.loop(), counters: counters,
                publish: { [weak self] snapshot in self?.received(snapshot) },
                fail: { [weak self] error in self?.failed(error) })
        } catch {
            failed(error)
            return
        }
        let cancelled = state.withLock { state in
            state.watcher = watcher
            return state.cancelled
        }
        if cancelled { watcher.cancel() }
        Self.live.withLock { $0[ObjectIdentifier(self)] = WeakMonitor(monitor: self) }
    }

    /// Stops the monitor: no update is delivered after it, `for await` loops end, and it
    /// cannot be started again.
    public func cancel() {
        let (watcher, streams) = state.withLock { state in
            state.cancelled = true
            defer {
                state.watcher = nil
                state.streams.removeAll()
            }
            return (state.watcher, Array(state.streams.values))
        }
        Self.live.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
        watcher?.cancel()
        for stream in streams { stream.finish() }
    }

    /// Braid: system calls the monitor's watcher has made (tests check that it makes none
    /// while idle).
    var systemCalls: Int { counters.systemCalls.load(ordering: .relaxed) }

    // MARK: Updates (on the watcher's loop)

    private func received(_ snapshot: InterfaceSnapshot) {
        state.withLock { $0.snapshot = snapshot }
        evaluate()
    }

    /// Works out the path from the latest snapshot and the marks, and hands it out if it
    /// changed. Runs on the watcher's loop only, so updates leave in order.
    private func evaluate() {
        let marks = NetworkInterfacePolicy.current
        let update = state.withLock { state -> Update? in
            guard !state.cancelled, let snapshot = state.snapshot else { return nil }
            let path = PathEvaluation.path(from: snapshot, required: requiredInterfaceType, prohibited: prohibitedInterfaceTypes, marks: marks)
            return state.offer(path)
        }
        update?.deliver(from: self)
    }

    private func failed(_ error: any Error) {
        let path = NWPath(status: .unsatisfied, unsatisfiedDescription: "the monitor cannot read the kernel's interfaces: \(error)")
        state.withLock { state in
            state.watcher = nil
            return state.cancelled ? nil : state.offer(path)
        }?.deliver(from: self)
    }

    private var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// A new path and who to tell.
    fileprivate struct Update {
        var path: NWPath
        var handler: (@Sendable (NWPath) -> Void)?
        var queue: DispatchQueue?
        var streams: [AsyncStream<NWPath>.Continuation]

        func deliver(from monitor: NWPathMonitor) {
            if let handler, let queue {
                let path = path
                queue.async { [weak monitor] in
                    // Nothing after cancel(), even what was already on its way.
                    guard let monitor, !monitor.isCancelled else { return }
                    handler(path)
                }
            }
            for stream in streams { stream.yield(path) }
        }
    }

    // MARK: Interface marks

    /// Running monitors, so a change of `NetworkInterfacePolicy` re-evaluates them.
    private static let live = Locked<[ObjectIdentifier: WeakMonitor]>([:])

    private struct WeakMonitor: Sendable {
        weak var monitor: NWPathMonitor?
    }

    static func policyChanged() {
        let monitors = live.withLock { $0.values.compactMap(\.monitor) }
        for monitor in monitors {
            guard let loop = monitor.state.withLock({ $0.watcher?.loop }) else { continue }
            loop.execute { [weak monitor] _ in monitor?.evaluate() }
        }
    }

    // MARK: AsyncSequence support

    /// Adds an `AsyncStream` continuation that gets every path from now on (the current one
    /// first, if there is one); starts the monitor if nobody has.
    func addStream(_ continuation: AsyncStream<NWPath>.Continuation) {
        let needsStart = state.withLock { state -> Bool in
            guard !state.cancelled else {
                continuation.finish()
                return false
            }
            let id = state.nextStream
            state.nextStream += 1
            state.streams[id] = continuation
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
            }
            // A stream nobody is waiting on yet: yielding resumes nothing under the lock, and
            // doing it here keeps the current path ahead of the next update.
            if state.delivered { continuation.yield(state.path) }
            return !state.started
        }
        if needsStart { start(queue: DispatchQueue(label: "braid.path-monitor")) }
    }
}

extension NWPathMonitor.State {
    /// Records `path` as current and returns the update to deliver, or nil if it is the path
    /// already handed out.
    fileprivate mutating func offer(_ path: NWPath) -> NWPathMonitor.Update? {
        guard !delivered || path != self.path else { return nil }
        self.path = path
        delivered = true
        return NWPathMonitor.Update(path: path, handler: handler, queue: queue, streams: Array(streams.values))
    }
}
