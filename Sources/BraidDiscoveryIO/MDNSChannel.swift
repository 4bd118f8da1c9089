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
    struct Browsing {
        var engine: MDNSBrowser
        var last: [MDNSBrowseResult]
        let onChange: @Sendable ([MDNSBrowseResult]) -> Void
    }

    struct Advertising {
        var engine: MDNSResponder
        let onEvent: @Sendable (MDNSResponder.Event) -> Void
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

    init(sockets: [MDNSSocket], interfaces: [MDNSInterface], origin: MonotonicInstant) {
        self.sockets = sockets
        self.interfaces = interfaces
        self.origin = origin
    }

    func start(_ context: LoopContext) throws {
        for socket in sockets { tokens.append(try context.register(self, fd: socket.fd)) }
        timer = context.registerTimer(self)
    }

    func now(_ context: LoopContext) -> Duration { context.now - origin }

    func addBrowser(_ id: UInt64, type: DNSName, onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void, _ context: LoopContext) {
        browsers[id] = Browsing(engine: MDNSBrowser(serviceType: type, now: now(context)), last: [], onChange: onChange)
        service(context)
    }

    func removeBrowser(_ id: UInt64) { browsers[id] = nil }

    func addResponder(_ id: UInt64, service description: MDNSServiceDescription, onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void, _ context: LoopContext) {
        var description = description
        description.addresses = interfaces.flatMap(\.records)
        responders[id] = Advertising(engine: MDNSResponder(service: description, now: now(context)), onEvent: onEvent)
        service(context)
    }

    func removeResponder(_ id: UInt64, _ context: LoopContext) {
        guard var advertising = responders.removeValue(forKey: id) else { return }
        if let goodbye = advertising.engine.goodbye() { multicast(goodbye) }
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
        for id in browsers.keys {
            browsers[id]!.engine.receive(message, interface: received.interface, now: at, fromPort: received.sourcePort)
        }
        for id in responders.keys {
            for outgoing in responders[id]!.engine.receive(message, now: at, fromPort: received.sourcePort) {
                if outgoing.unicastToSender {
                    socket.send(outgoing.message.serialized(), to: received.source)
                } else {
                    multicast(outgoing.message)
                }
            }
        }
    }

    package func writable(_ context: LoopContext) {}

    package func timerFired(_ context: LoopContext) { service(context) }

    package func close(_ context: LoopContext) {
        for id in Array(responders.keys) { removeResponder(id, context) }
        for token in tokens { context.deregister(token) }
        tokens = []
    }

    /// Polls every engine, sends what is due, reports changes, and sets the timer to the next deadline.
    func service(_ context: LoopContext) {
        let at = now(context)
        if !browsers.isEmpty || !responders.isEmpty, at - lastScan >= Self.interfaceScanInterval {
            lastScan = at
            scanInterfaces()
        }
        var next: Duration?
        for id in browsers.keys {
            for query in browsers[id]!.engine.poll(now: at) { multicast(query) }
            let results = browsers[id]!.engine.results()
            if results != browsers[id]!.last {
                browsers[id]!.last = results
                browsers[id]!.onChange(results)
            }
            let deadline = browsers[id]!.engine.nextDeadline
            next = min(next ?? deadline, deadline)
        }
        for id in responders.keys {
            for message in responders[id]!.engine.poll(now: at) { multicast(message) }
            for event in responders[id]!.engine.takeEvents() { responders[id]!.onEvent(event) }
            if let deadline = responders[id]!.engine.nextDeadline { next = min(next ?? deadline, deadline) }
        }
        if next != nil { next = min(next!, lastScan + Self.interfaceScanInterval) }
        context.setTimer(timer, at: next.map { origin + max($0, at) })
    }

    /// Joins the group on interfaces that came up since the last scan and sends on them from
    /// now on. (A responder keeps the addresses it started with.)
    func scanInterfaces() {
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
    }

    func multicast(_ message: DNSMessage) {
        let bytes = message.serialized()
        for socket in sockets {
            for interface in interfaces where socket.joined.contains(interface.index) {
                socket.sendToGroup(bytes, interface: interface.index)
            }
        }
    }
}
