import BraidCore
import BraidDiscovery
import BraidIO
import Synchronization

/// The process's multicast DNS, from any thread: browsers and advertised services by ID, each
/// call posted to the channel's loop. Made once its sockets open (`shared(on:)`); they stay open
/// for the life of the process.
package final class MDNSDiscovery: Sendable {
    package let loop: EventLoop
    let channel: LoopBound<MDNSChannel>
    let ids = Atomic<UInt64>(1)

    static let made = Mutex<MDNSDiscovery?>(nil)

    /// The process's discovery, opening its sockets on first use (on `loop`). A failure to open
    /// them is not kept: the next call tries again (the port may have been freed, a link come up).
    package static func shared(on loop: @autoclosure () -> EventLoop) throws(MDNSSocketError) -> MDNSDiscovery {
        let result = made.withLock { made -> Result<MDNSDiscovery, MDNSSocketError> in
            if let made { return .success(made) }
            let result = Result { () throws(MDNSSocketError) in try MDNSDiscovery(loop: loop()) }
            if case .success(let discovery) = result { made = discovery }
            return result
        }
        return try result.get()
    }

    /// A discovery of its own on `loop`, beside the process's: its sockets and interfaces are
    /// those of the loop thread's network namespace (the tests run hosts in namespaces this
    /// way). `recordTTLs` are the TTLs its responders publish.
    /// Browsers, listeners and `.service` connections whose work runs on `loop` use it in place
    /// of the process's until `detach()`.
    package static func attach(to loop: EventLoop, recordTTLs: MDNSResponder.RecordTTLs = .standard) async throws -> MDNSDiscovery {
        let discovery = try await loop.submit { _ in try MDNSDiscovery(loop: loop, recordTTLs: recordTTLs) }
        attached.withLock { $0[ObjectIdentifier(loop)] = discovery }
        return discovery
    }

    /// The discoveries attached to loops.
    static let attached = Mutex<[ObjectIdentifier: MDNSDiscovery]>([:])

    /// The discovery attached to `loop`, if any.
    package static func attached(to loop: EventLoop) -> MDNSDiscovery? {
        attached.withLock { $0[ObjectIdentifier(loop)] }
    }

    /// Stops every browser and responder (responders say goodbye) and detaches from the loop.
    package func detach() async {
        let bound = channel
        _ = try? await loop.submit { context in bound.value.close(context) }
        let loop = self.loop
        Self.attached.withLock { attached in
            if attached[ObjectIdentifier(loop)] === self { attached[ObjectIdentifier(loop)] = nil }
        }
    }

    init(loop: EventLoop, recordTTLs: MDNSResponder.RecordTTLs = .standard) throws(MDNSSocketError) {
        let interfaces = MDNSInterface.current()
        var sockets: [MDNSSocket] = []
        let v4 = try MDNSSocket(ipv6: false)
        for interface in interfaces where !interface.ipv4.isEmpty { v4.join(interface: interface.index) }
        sockets.append(v4)
        // IPv6 where the host has it; a host without IPv6 browses and advertises over IPv4 alone.
        if let v6 = try? MDNSSocket(ipv6: true) {
            for interface in interfaces where !interface.ipv6.isEmpty { v6.join(interface: interface.index) }
            sockets.append(v6)
        }
        self.loop = loop
        let channel = MDNSChannel(sockets: sockets, interfaces: interfaces, origin: monotonicNow(), recordTTLs: recordTTLs)
        self.channel = LoopBound(handingOver: channel, to: loop)
        let bound = self.channel
        loop.execute { context in
            // Registering an open socket with epoll fails only when the process is out of memory
            // or descriptors; the channel then stays silent and browsers see no results.
            try? bound.value.start(context)
        }
    }

    /// Starts browsing for `type`; `onChange` gets every new list of results, on the loop.
    /// With `interfaces`, it queries and listens only on the interfaces that returns true for
    /// (by index and name, asked on the loop).
    package func browse(
        type: DNSName, interfaces: (@Sendable (Int32, String) -> Bool)? = nil,
        onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void
    ) -> UInt64 {
        let id = ids.add(1, ordering: .relaxed).oldValue
        let bound = channel
        loop.execute { context in bound.value.addBrowser(id, type: type, allows: interfaces, onChange: onChange, context) }
        return id
    }

    /// Whether the browser with this ID still browses (asked of the loop).
    package func isBrowsing(_ id: UInt64) async -> Bool {
        let bound = channel
        return await withCheckedContinuation { continuation in
            loop.execute { _ in continuation.resume(returning: bound.value.browsers[id] != nil) }
        }
    }

    package func stopBrowsing(_ id: UInt64) {
        let bound = channel
        loop.execute { _ in bound.value.removeBrowser(id) }
    }

    /// Starts advertising `service` (its addresses are the interfaces'); `onEvent` gets its
    /// registration and renames, on the loop. With `interfaces`, it runs only on the
    /// interfaces that returns true for (by index and name, asked on the loop).
    package func advertise(
        _ service: MDNSServiceDescription, interfaces: (@Sendable (Int32, String) -> Bool)? = nil,
        onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void
    ) -> UInt64 {
        let id = ids.add(1, ordering: .relaxed).oldValue
        let bound = channel
        loop.execute { context in bound.value.addResponder(id, service: service, allows: interfaces, onEvent: onEvent, context) }
        return id
    }

    /// Announces the advertisement's new TXT record (`MDNSResponder.update(txt:now:)`).
    package func updateTXT(_ id: UInt64, txt: [[UInt8]]) {
        let bound = channel
        loop.execute { context in bound.value.updateResponder(id, txt: txt, context) }
    }

    /// Stops advertising, sending the goodbye.
    package func stopAdvertising(_ id: UInt64) {
        let bound = channel
        loop.execute { context in bound.value.removeResponder(id, context) }
    }
}
