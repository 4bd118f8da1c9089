import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Keeps an `InterfaceTable` in step with the kernel over one rtnetlink socket registered on an
/// event loop, and publishes an `InterfaceSnapshot` whenever what it describes changes.
///
/// Event-driven: it dumps links, then addresses, then routes (one dump at a time, as netlink
/// requires), then only reads when the kernel sends an event, so while nothing changes it
/// makes no system calls at all (`Counters.systemCalls` shows it). A lost event (ENOBUFS) or
/// a dump the kernel marks inconsistent starts the dumps over.
package final class InterfaceWatcher: LoopHandler {
    /// What the watcher has done, readable from any thread.
    package final class Counters: Sendable {
        /// Every system call the watcher made: on its socket, and reading /sys and
        /// /etc/resolv.conf when something changed.
        package let systemCalls = Atomic<Int>(0)
        /// Messages read (dump answers and events).
        package let messages = Atomic<Int>(0)
        /// Messages the parser skipped as malformed.
        package let malformed = Atomic<Int>(0)
        /// Times the tables were dumped again after a loss.
        package let resyncs = Atomic<Int>(0)
        /// Snapshots published.
        package let snapshots = Atomic<Int>(0)

        package init() {}
    }

    private let socket: RouteNetlinkSocket
    private let counters: Counters
    private let publish: ((InterfaceSnapshot) -> Void)?
    private let kernelEvents: (() -> Void)?
    private let fail: (DatapathError) -> Void
    private var token: UInt64?
    private var closed = false
    private var table = InterfaceTable()
    /// Each link's kind, decided once per index and name.
    private var kinds: [Int32: (name: String, kind: LinkKind)] = [:]
    /// System calls spent outside the socket (sysfs, resolv.conf).
    private var otherSystemCalls = 0
    private var sequence: UInt32 = 0
    /// The dump in progress (its request type), or nil once in step with the kernel.
    private var dumping: UInt16?
    private var dumpInterrupted = false
    private var synchronized = false
    private var lastPublished: InterfaceSnapshot?
    /// The current read brought a kernel event (not only dump answers).
    private var sawEvent = false

    private init(
        socket: RouteNetlinkSocket, counters: Counters, publish: ((InterfaceSnapshot) -> Void)?, kernelEvents: (() -> Void)?,
        fail: @escaping (DatapathError) -> Void
    ) {
        self.socket = socket
        self.counters = counters
        self.publish = publish
        self.kernelEvents = kernelEvents
        self.fail = fail
    }

    /// Starts watching through `socket` (made on the caller's thread, so in its network
    /// namespace) on `loop`. `publish` (nil: no snapshots, so no /sys or resolv.conf reads)
    /// gets each changed snapshot; `kernelEvents` is told once the first dumps are done and
    /// after each read that brought any event at all (a route to anywhere, not only the
    /// default routes the table keeps). All run on the loop; after `fail` the watcher has
    /// stopped.
    package static func start(
        socket: RouteNetlinkSocket, on loop: EventLoop, counters: Counters,
        publish: (@Sendable (InterfaceSnapshot) -> Void)?, kernelEvents: (@Sendable () -> Void)? = nil,
        fail: @escaping @Sendable (DatapathError) -> Void
    ) -> Handle {
        let watcher = LoopBound(
            handingOver: InterfaceWatcher(socket: socket, counters: counters, publish: publish, kernelEvents: kernelEvents, fail: fail), to: loop)
        loop.execute { context in watcher.value.begin(context) }
        return Handle(watcher: watcher)
    }

    /// Stops the watcher from any thread.
    package struct Handle: Sendable {
        fileprivate let watcher: LoopBound<InterfaceWatcher>

        package var loop: EventLoop { watcher.loop }

        package func cancel() {
            let watcher = watcher
            watcher.loop.execute { context in watcher.value.stop(context) }
        }

        /// The interfaces now, without the DNS check (nil until the first dumps are done, or
        /// while a loss is being repaired). Call on the watcher's loop.
        package func currentSnapshot() -> InterfaceSnapshot? {
            watcher.value.currentSnapshot()
        }
    }

    /// The interfaces as the table describes them (/sys is read for links not seen before).
    fileprivate func currentSnapshot() -> InterfaceSnapshot? {
        guard synchronized else { return nil }
        defer { updateCounters() }
        return makeSnapshot(readingNameServers: false)
    }

    private func begin(_ context: LoopContext) {
        do {
            token = try context.register(self, fd: socket.fd)
            try startDumps()
        } catch {
            failed(error as? DatapathError ?? .system("netlink", EIO), context)
        }
        updateCounters()
    }

    private func stop(_ context: LoopContext) {
        if let token { context.deregister(token) }
        token = nil
        closeSocket()
    }

    /// Closes the socket once, registered or not (registering may have failed).
    private func closeSocket() {
        guard !closed else { return }
        closed = true
        socket.close()
        updateCounters()
    }

    private func failed(_ error: DatapathError, _ context: LoopContext) {
        stop(context)
        fail(error)
    }

    /// Dumps everything again after a loss: at once, or, while a dump runs (netlink allows one
    /// at a time), when it ends.
    private func resynchronize() throws {
        if dumping != nil {
            dumpInterrupted = true
        } else {
            counters.resyncs.add(1, ordering: .relaxed)
            try startDumps()
        }
    }

    /// Forgets the table and dumps everything again, links first.
    private func startDumps() throws {
        table.removeAll()
        synchronized = false
        try requestDump(RouteNetlinkParser.getLink)
    }

    private func requestDump(_ type: UInt16) throws {
        sequence = sequence == .max ? 1 : sequence + 1
        dumping = type
        dumpInterrupted = false
        try socket.requestDump(type, sequence: sequence)
    }

    // MARK: LoopHandler

    package func readable(_ context: LoopContext) {
        let wasSynchronized = synchronized
        sawEvent = false
        do {
            try readAll(context)
        } catch {
            failed(error as? DatapathError ?? .system("netlink", EIO), context)
            return
        }
        if synchronized {
            if publish != nil { publishIfChanged() }
            if sawEvent || !wasSynchronized { kernelEvents?() }
        }
        updateCounters()
    }

    package func writable(_ context: LoopContext) {}
    package func timerFired(_ context: LoopContext) {}

    package func close(_ context: LoopContext) {
        token = nil
        closeSocket()
    }

    /// Reads until the socket is empty, applying every message.
    private func readAll(_ context: LoopContext) throws {
        let buffer = context.readScratch
        while token != nil {
            switch try socket.receive(into: buffer) {
            case .wouldBlock:
                return
            case .overrun:
                // Events were lost: only a fresh dump says what the tables hold now. Whatever
                // is still queued is read (and superseded) meanwhile.
                try resynchronize()
            case .bytes(let count):
                let result = RouteNetlinkParser.parse(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                counters.messages.add(result.messages.count, ordering: .relaxed)
                if result.malformed > 0 { counters.malformed.add(result.malformed, ordering: .relaxed) }
                for message in result.messages { try handle(message) }
            }
        }
    }

    private func handle(_ message: RouteNetlinkMessage) throws {
        let answersDump = dumping != nil && message.sequence == sequence
        if answersDump, message.interrupted { dumpInterrupted = true }
        // Anything but an answer to our own dump is an event. Not only sequence 0: the kernel's
        // notification of a change another process asked for over netlink (`ip route add`)
        // carries that request's sequence number.
        if !answersDump { sawEvent = true }
        switch message.content {
        case .done where answersDump:
            try dumpFinished()
        case .error(let code) where answersDump:
            throw DatapathError.system("netlink dump", code)
        case .overrun:
            try resynchronize()
        default:
            table.apply(message.content)
        }
    }

    private func dumpFinished() throws {
        if dumpInterrupted {
            // The tables changed under the dump: it may have missed or kept something.
            counters.resyncs.add(1, ordering: .relaxed)
            try startDumps()
            return
        }
        switch dumping {
        case RouteNetlinkParser.getLink: try requestDump(RouteNetlinkParser.getAddress)
        case RouteNetlinkParser.getAddress: try requestDump(RouteNetlinkParser.getRoute)
        default:
            dumping = nil
            synchronized = true
        }
    }

    // MARK: Snapshots

    private func publishIfChanged() {
        let snapshot = makeSnapshot()
        guard snapshot != lastPublished else { return }
        lastPublished = snapshot
        counters.snapshots.add(1, ordering: .relaxed)
        updateCounters()
        publish?(snapshot)
    }

    private func makeSnapshot(readingNameServers: Bool = true) -> InterfaceSnapshot {
        let links = table.links.values.sorted { $0.index < $1.index }
        kinds = kinds.filter { table.links[$0.key] != nil }
        let interfaces = links.map { link in
            InterfaceSnapshot.Interface(link: link, kind: kind(of: link), addresses: table.addresses[link.index] ?? [])
        }
        return InterfaceSnapshot(
            interfaces: interfaces, defaultRoutes: table.defaultRoutes, hasNameServer: readingNameServers ? readHasNameServer() : false)
    }

    private func kind(of link: NetlinkLink) -> LinkKind {
        if let known = kinds[link.index], known.name == link.name { return known.kind }
        let kind = LinkKind.classify(link, facts: LinkDeviceFacts.read(for: link, systemCalls: &otherSystemCalls))
        kinds[link.index] = (link.name, kind)
        return kind
    }

    /// Read each time something changed rather than watched: resolv.conf changes send no
    /// netlink event, so a change of DNS servers alone shows at the next path change.
    private func readHasNameServer() -> Bool {
        guard let text = LinkDeviceFacts.readSmallFile("/etc/resolv.conf", systemCalls: &otherSystemCalls) else { return false }
        return text.split(separator: "\n").contains { line in
            line.split(whereSeparator: { $0 == " " || $0 == "\t" }).first == "nameserver"
        }
    }

    private func updateCounters() {
        counters.systemCalls.store(socket.systemCalls + otherSystemCalls, ordering: .relaxed)
    }
}
