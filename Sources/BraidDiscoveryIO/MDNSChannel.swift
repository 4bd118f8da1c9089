import BraidCore
import BraidDiscovery
import BraidIO
import Glibc

/// The loop-side owner of multicast DNS for the process: the sockets (IPv4 and IPv6), every
/// browser's and responder's engine, one timer at the earliest of their deadlines. Messages are
/// read from the sockets in turn, at most `readsPerWakeup` from each per wakeup; those from the
/// local link are handed to every engine, and what the engines return is sent at once, on each
/// interface (or to the querier, for a legacy unicast answer).
package final class MDNSChannel: LoopHandler {
    /// Which interfaces a browser or responder runs on.
    struct InterfaceChoice {
        /// Whether it runs on an interface (by index and name); nil: on every one.
        let allows: (@Sendable (Int32, String) -> Bool)?
        /// The interfaces `allows` took, asked again at each scan of the interfaces (not for
        /// each message: the answer may read files).
        var allowed: Set<Int32> = []

        init(_ allows: (@Sendable (Int32, String) -> Bool)?, among interfaces: [MDNSInterface]) {
            self.allows = allows
            ask(interfaces)
        }

        func includes(_ interface: MDNSInterface) -> Bool { allows == nil || allowed.contains(interface.index) }

        mutating func ask(_ interfaces: [MDNSInterface]) {
            guard let allows else { return }
            allowed = Set(interfaces.filter { allows($0.index, $0.name) }.map(\.index))
        }
    }

    struct Browsing {
        var engine: MDNSBrowser
        var last: [MDNSBrowseResult]
        let onChange: @Sendable ([MDNSBrowseResult]) -> Void
        var interfaces: InterfaceChoice
    }

    struct Advertising {
        var engine: MDNSResponder
        let onEvent: @Sendable (MDNSResponder.Event) -> Void
        var interfaces: InterfaceChoice

        func runs(on interface: MDNSInterface) -> Bool { interfaces.includes(interface) }
    }

    /// How often the interfaces are read again while anything browses or advertises, so links
    /// that come up later are joined.
    static let interfaceScanInterval = Duration.seconds(5)

    let sockets: [MDNSSocket]
    var interfaces: [MDNSInterface]
    var lastScan: Duration = .zero
    let origin: MonotonicInstant
    var tokens: [UInt64] = []
    var timer: UInt64 = 0
    var browsers: [UInt64: Browsing] = [:]
    var responders: [UInt64: Advertising] = [:]

    /// The TTLs of the records the responders publish.
    let recordTTLs: MDNSResponder.RecordTTLs

    init(sockets: [MDNSSocket], interfaces: [MDNSInterface], origin: MonotonicInstant, recordTTLs: MDNSResponder.RecordTTLs = .standard) {
        self.sockets = sockets
        self.interfaces = interfaces
        self.origin = origin
        self.recordTTLs = recordTTLs
    }

    func start(_ context: LoopContext) throws {
        for socket in sockets { tokens.append(try context.register(self, fd: socket.fd)) }
        timer = context.registerTimer(self)
    }

    func now(_ context: LoopContext) -> Duration { context.now - origin }

    func addBrowser(
        _ id: UInt64, type: DNSName, allows: (@Sendable (Int32, String) -> Bool)?,
        onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void, _ context: LoopContext
    ) {
        browsers[id] = Browsing(
            engine: MDNSBrowser(serviceType: type, now: now(context)), last: [], onChange: onChange,
            interfaces: InterfaceChoice(allows, among: interfaces))
        service(context)
    }

    func removeBrowser(_ id: UInt64) { browsers[id] = nil }

    func addResponder(
        _ id: UInt64, service description: MDNSServiceDescription, allows: (@Sendable (Int32, String) -> Bool)?,
        onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void, _ context: LoopContext
    ) {
        var description = description
        // The addresses of the interfaces it runs on; each interface's messages carry its own.
        let choice = InterfaceChoice(allows, among: interfaces)
        description.addresses = interfaces.filter(choice.includes).flatMap(\.records)
        let engine = MDNSResponder(service: description, now: now(context), ttls: recordTTLs)
        responders[id] = Advertising(engine: engine, onEvent: onEvent, interfaces: choice)
        service(context)
    }

    func updateResponder(_ id: UInt64, txt: [[UInt8]], _ context: LoopContext) {
        guard responders[id] != nil else { return }
        responders[id]!.engine.update(txt: txt, now: now(context))
        service(context)
    }

    func removeResponder(_ id: UInt64, _ context: LoopContext) {
        guard var advertising = responders.removeValue(forKey: id) else { return }
        if let goodbye = advertising.engine.goodbye() { send(goodbye, of: advertising, on: nil) }
        service(context)
    }

    /// The most datagrams read from one socket per wakeup; the loop's epoll is level-triggered,
    /// so what is left wakes it again after its other work, and a flood cannot starve it.
    package static let readsPerWakeup = 64

    package func readable(_ context: LoopContext) {
        Self.readInTurn(sources: sockets.count) { index in
            let socket = sockets[index]
            guard let received = socket.receive() else { return false }
            if let received { handle(received, on: socket, context) }
            return true
        }
        service(context)
    }

    /// Reads one datagram from each source in turn (`read` returns false once its source is
    /// empty, which leaves it out from then on), for at most `limit` rounds.
    package static func readInTurn(sources count: Int, limit: Int = readsPerWakeup, read: (Int) -> Bool) {
        var open = Array(0..<count)
        var round = 0
        while !open.isEmpty, round < limit {
            open = open.filter { read($0) }
            round += 1
        }
    }

    /// Hands a datagram from the local link to every engine (RFC 6762 §6, §11: `MDNSSource`) and
    /// sends their answers.
    func handle(_ received: MDNSSocket.Received, on socket: MDNSSocket, _ context: LoopContext) {
        guard let message = try? DNSMessage(parsing: received.bytes) else { return }
        let source = MDNSSource(address: received.sourceAddress, port: received.sourcePort)
        let subnets = interfaces.first { $0.index == received.interface }?.subnets ?? []
        guard source.admits(message, arrivingOn: subnets) else { return }
        let at = now(context)
        let arrival = interfaces.first { $0.index == received.interface }
        for id in browsers.keys {
            // A browser hears only the interfaces it runs on.
            if let arrival, !browsers[id]!.interfaces.includes(arrival) { continue }
            browsers[id]!.engine.receive(message, interface: received.interface, now: at, fromPort: received.sourcePort)
        }
        for id in responders.keys {
            // A responder hears only the interfaces it runs on.
            guard let arrival, responders[id]!.runs(on: arrival) else { continue }
            for outgoing in responders[id]!.engine.receive(message, now: at, from: source, interface: received.interface) {
                if outgoing.unicastToSender {
                    guard let answer = responders[id]!.engine.addressed(outgoing.message, to: arrival.records) else { continue }
                    socket.send(answer.serialized(), to: received.source)
                } else {
                    send(outgoing.message, of: responders[id]!, on: outgoing.interface)
                }
            }
        }
    }

    package func writable(_ context: LoopContext) {}

    package func timerFired(_ context: LoopContext) { service(context) }

    package func close(_ context: LoopContext) {
        for id in Array(responders.keys) { removeResponder(id, context) }
        browsers = [:]
        context.setTimer(timer, at: nil)
        for token in tokens { context.deregister(token) }
        tokens = []
    }

    /// Polls every engine, sends what is due, reports changes, and sets the timer to the next deadline.
    func service(_ context: LoopContext) {
        let at = now(context)
        if !browsers.isEmpty || !responders.isEmpty, at - lastScan >= Self.interfaceScanInterval {
            lastScan = at
            scanInterfaces(now: at)
        }
        var next: Duration?
        for id in browsers.keys {
            for query in browsers[id]!.engine.poll(now: at) { multicast(query, on: browsers[id]!.interfaces) }
            let results = browsers[id]!.engine.results()
            if results != browsers[id]!.last {
                browsers[id]!.last = results
                browsers[id]!.onChange(results)
            }
            let deadline = browsers[id]!.engine.nextDeadline
            next = min(next ?? deadline, deadline)
        }
        for id in responders.keys {
            // (A legacy query is answered at once, so nothing polled goes to one sender.)
            for outgoing in responders[id]!.engine.pollOutgoing(now: at) where !outgoing.unicastToSender {
                send(outgoing.message, of: responders[id]!, on: outgoing.interface)
            }
            for event in responders[id]!.engine.takeEvents() { responders[id]!.onEvent(event) }
            if let deadline = responders[id]!.engine.nextDeadline { next = min(next ?? deadline, deadline) }
        }
        if next != nil { next = min(next!, lastScan + Self.interfaceScanInterval) }
        context.setTimer(timer, at: next.map { origin + max($0, at) })
    }

    /// Joins the group on interfaces that came up since the last scan and sends on them from
    /// now on; gives each responder the current addresses of the interfaces it runs on (it
    /// announces again when they changed).
    func scanInterfaces(now at: Duration) {
        let current = MDNSInterface.current()
        for socket in sockets {
            // The kernel drops a membership with its interface; one that returns is joined again.
            for index in socket.joined where !current.contains(where: { $0.index == index }) { socket.forget(interface: index) }
        }
        for interface in current {
            for socket in sockets where socket.ipv6 ? !interface.ipv6.isEmpty : !interface.ipv4.isEmpty {
                socket.join(interface: interface.index)
            }
        }
        interfaces = current
        for id in responders.keys {
            responders[id]!.interfaces.ask(current)
            let addresses = current.filter(responders[id]!.interfaces.includes).flatMap(\.records)
            responders[id]!.engine.update(addresses: addresses, now: at)
        }
        for id in browsers.keys { browsers[id]!.interfaces.ask(current) }
    }

    /// Multicasts a responder's message on `interface` (nil: every interface it runs on), each
    /// copy with that interface's addresses alone.
    func send(_ message: DNSMessage, of advertising: Advertising, on interface: Int32?) {
        for socket in sockets {
            for candidate in interfaces where socket.joined.contains(candidate.index) && (interface == nil || candidate.index == interface)
                && advertising.runs(on: candidate) {
                guard let copy = advertising.engine.addressed(message, to: candidate.records) else { continue }
                socket.sendToGroup(copy.serialized(), interface: candidate.index)
            }
        }
    }

    /// Multicasts `message` on every interface `choice` includes.
    func multicast(_ message: DNSMessage, on choice: InterfaceChoice) {
        let bytes = message.serialized()
        for socket in sockets {
            for interface in interfaces where socket.joined.contains(interface.index) && choice.includes(interface) {
                socket.sendToGroup(bytes, interface: interface.index)
            }
        }
    }
}
