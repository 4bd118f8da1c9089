import BraidIO
import Foundation
import Synchronization
import Testing

@testable import Braid
import BraidCore

/// `NWPathMonitor` against the kernel: each test makes its own network namespace with veth
/// pairs, starts monitors inside it and changes links, addresses and routes. Latencies are
/// printed, never asserted; what is asserted is the order of the updates and what they say.
@Suite(.timeLimit(.minutes(3))) struct PathMonitorNamespaceTests {
    /// A namespace with loopback and one uplink: `va` (10.77.0.1) joined to `vb` (10.77.0.2),
    /// the default route through `va`.
    private static func withUplink<T: Sendable>(_ body: (NetworkNamespace) async throws -> T) async throws -> T {
        try await NetworkNamespace.with { namespace in
            try await namespace.addVethPair("va", address: "10.77.0.1", peer: "vb", peerAddress: "10.77.0.2")
            try await namespace.ip("route", "add", "default", "via", "10.77.0.2", "dev", "va")
            return try await body(namespace)
        }
    }

    /// Starts `monitor` on a thread inside `namespace`, recording its updates.
    private static func start(_ monitor: NWPathMonitor, in namespace: NetworkNamespace) async throws -> PathRecorder {
        let recorder = PathRecorder()
        monitor.pathUpdateHandler = { path in recorder.record(path) }
        try await namespace.inside { monitor.start(queue: DispatchQueue(label: "path-test")) }
        return recorder
    }

    @Test func linkDownIsUnsatisfiedAndLinkUpSatisfiedAgain() async throws {
        try await Self.withUplink { namespace in
            let monitor = NWPathMonitor()
            defer { monitor.cancel() }
            let recorder = try await Self.start(monitor, in: namespace)
            let first = try await recorder.next { _ in true }
            #expect(first.path.status == .satisfied, "\(first.path)")
            #expect(first.path.availableInterfaces.map(\.name) == ["va"])
            #expect(first.path.availableInterfaces.first?.type == .other)
            #expect(first.path.gateways == [.hostPort(host: "10.77.0.2", port: .any)])
            #expect(first.path.supportsIPv4 && !first.path.supportsIPv6 && !first.path.isExpensive)
            #expect(monitor.currentPath == first.path)

            // Carrier lost: the peer goes down, `va` stays up but stops running.
            let carrierLost = try await namespace.setLink("vb", up: false)
            let lost = try await recorder.next(after: first) { $0.status == .unsatisfied }
            #expect(lost.path.unsatisfiedDescription == "no network interface is up and running (vb, va down)", "\(lost.path)")
            print("carrier lost -> unsatisfied after \(lost.arrival - carrierLost)")

            // Carrier back: the route survived, so the path is satisfied again by itself.
            let carrierBack = try await namespace.setLink("vb", up: true)
            let back = try await recorder.next(after: lost) { $0.status == .satisfied }
            #expect(back.path == first.path)
            print("carrier back -> satisfied after \(back.arrival - carrierBack)")

            // Administratively down: the kernel flushes the default route without telling, so
            // bringing the link up again is not enough: the route has to come back too.
            let linkDown = try await namespace.setLink("va", up: false)
            let down = try await recorder.next(after: back) { $0.status == .unsatisfied }
            print("link down -> unsatisfied after \(down.arrival - linkDown)")
            _ = try await namespace.setLink("va", up: true)
            let noRoute = try await recorder.next(after: down) { $0.unsatisfiedDescription?.hasPrefix("no default route") == true }
            #expect(noRoute.path.status == .unsatisfied)
            try await namespace.ip("route", "add", "default", "via", "10.77.0.2", "dev", "va")
            let again = try await recorder.next(after: noRoute) { $0.status == .satisfied }
            #expect(again.path == first.path)

            // In order, with nothing satisfied between a loss and its repair.
            #expect(recorder.statuses == [.satisfied, .unsatisfied, .satisfied, .unsatisfied, .satisfied], "\(recorder.paths)")
        }
    }

    @Test func interfaceTypesFilterWhatAMonitorSees() async throws {
        try await Self.withUplink { namespace in
            // The uplink's metric 10 leaves room for a preferred one.
            try await namespace.ip("route", "del", "default")
            try await namespace.ip("route", "add", "default", "via", "10.77.0.2", "dev", "va", "metric", "10")
            let general = NWPathMonitor()
            let loopback = NWPathMonitor(requiredInterfaceType: .loopback)
            let wifi = NWPathMonitor(requiredInterfaceType: .wifi)
            let other = NWPathMonitor(requiredInterfaceType: .other)
            let noOther = NWPathMonitor(prohibitedInterfaceTypes: [.other])
            let noCellular = NWPathMonitor(prohibitedInterfaceTypes: [.cellular])
            let all = [general, loopback, wifi, other, noOther, noCellular]
            defer { for monitor in all { monitor.cancel() } }
            var recorders: [PathRecorder] = []
            for monitor in all { recorders.append(try await Self.start(monitor, in: namespace)) }
            var firsts: [NWPath] = []
            for recorder in recorders { firsts.append(try await recorder.next { _ in true }.path) }
            #expect(firsts.map(\.status) == [.satisfied, .satisfied, .unsatisfied, .satisfied, .unsatisfied, .satisfied])
            #expect(firsts[1].availableInterfaces.map(\.type) == [.loopback] && firsts[1].supportsIPv4)
            #expect(firsts[2].unsatisfiedDescription == "no interface allowed by requiredInterfaceType wifi is up (vb is other, va is other)")
            #expect(firsts[4].unsatisfiedDescription == "no interface allowed by prohibitedInterfaceTypes [other] is up (vb is other, va is other)")

            // A cellular uplink (a WWAN name) with the lower metric becomes the preferred one:
            // expensive, and invisible to the monitor that prohibits cellular.
            try await namespace.addVethPair("wwan5", address: "10.78.0.1", peer: "cellpeer", peerAddress: "10.78.0.2")
            try await namespace.ip("route", "add", "default", "via", "10.78.0.2", "dev", "wwan5", "metric", "5")
            let cellular = try await recorders[0].next(after: nil) { $0.usesInterfaceType(.cellular) }
            #expect(cellular.path.availableInterfaces.map(\.name) == ["wwan5", "va"])
            #expect(cellular.path.availableInterfaces.map(\.type) == [.cellular, .other])
            #expect(cellular.path.isExpensive && !cellular.path.isConstrained)
            #expect(noCellular.currentPath.availableInterfaces.map(\.name) == ["va"] && !noCellular.currentPath.isExpensive)
            let onlyCellular = try await recorders[4].next { $0.status == .satisfied }
            #expect(onlyCellular.path.availableInterfaces.map(\.name) == ["wwan5"])
            #expect(wifi.currentPath.status == .unsatisfied)
        }
    }

    @Test func markedInterfacesAreExpensiveOrConstrained() async throws {
        try await NetworkNamespace.with { namespace in
            // Names of this test's own (the marks are process-wide; tests run in parallel).
            try await namespace.addVethPair("pmmark0", address: "10.79.0.1", peer: "pmpeer0", peerAddress: "10.79.0.2")
            try await namespace.ip("route", "add", "default", "via", "10.79.0.2", "dev", "pmmark0")
            let monitor = NWPathMonitor()
            defer { monitor.cancel() }
            let recorder = try await Self.start(monitor, in: namespace)
            let first = try await recorder.next { _ in true }
            #expect(first.path.status == .satisfied && !first.path.isExpensive && !first.path.isConstrained)

            // Marking re-evaluates running monitors at once; nothing changed in the kernel.
            NetworkInterfacePolicy.expensiveInterfaces.insert("pmmark0")
            defer { NetworkInterfacePolicy.expensiveInterfaces.remove("pmmark0") }
            let expensive = try await recorder.next(after: first) { $0.isExpensive }
            #expect(!expensive.path.isConstrained)
            NetworkInterfacePolicy.constrainedInterfaces.insert("pmmark*")
            defer { NetworkInterfacePolicy.constrainedInterfaces.remove("pmmark*") }
            let constrained = try await recorder.next(after: expensive) { $0.isConstrained }
            #expect(constrained.path.isExpensive)
            NetworkInterfacePolicy.expensiveInterfaces.remove("pmmark0")
            NetworkInterfacePolicy.constrainedInterfaces.remove("pmmark*")
            let plain = try await recorder.next(after: constrained) { !$0.isExpensive && !$0.isConstrained }
            #expect(plain.path == first.path)
        }
    }

    @Test func anIPv6OnlyUplinkSupportsIPv6Only() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.addVethPair("v6a", address: "10.80.0.1", peer: "v6b", peerAddress: "10.80.0.2")
            // Past duplicate address detection at once (nodad), so the address is usable.
            try await namespace.ip("address", "add", "2001:db8:80::1/64", "dev", "v6a", "nodad")
            // A gateway on v6a's link that is not an address of this namespace (IPv6 refuses those).
            try await namespace.ip("-6", "route", "add", "default", "via", "2001:db8:80::99", "dev", "v6a")
            let monitor = NWPathMonitor()
            defer { monitor.cancel() }
            let recorder = try await Self.start(monitor, in: namespace)
            let first = try await recorder.next { $0.status == .satisfied }
            #expect(first.path.supportsIPv6 && !first.path.supportsIPv4, "\(first.path)")
            #expect(first.path.gateways == [.hostPort(host: "2001:db8:80::99", port: .any)])
            #expect(first.path.availableInterfaces.map(\.name) == ["v6a"])
            // An IPv4 default route as well: both families.
            try await namespace.ip("route", "add", "default", "via", "10.80.0.2", "dev", "v6a")
            let both = try await recorder.next(after: first) { $0.supportsIPv4 }
            #expect(both.path.supportsIPv6 && both.path.gateways.count == 2)
        }
    }

    @Test func anIdleMonitorMakesNoSystemCalls() async throws {
        try await Self.withUplink { namespace in
            let monitor = NWPathMonitor()
            defer { monitor.cancel() }
            let recorder = try await Self.start(monitor, in: namespace)
            let first = try await recorder.next { _ in true }
            #expect(first.path.status == .satisfied)
            try await Task.sleep(for: .milliseconds(200))
            let before = (calls: monitor.systemCalls, messages: monitor.counters.messages.load(ordering: .relaxed))
            try await Task.sleep(for: .seconds(1))
            let after = (calls: monitor.systemCalls, messages: monitor.counters.messages.load(ordering: .relaxed))
            print("idle second: \(after.calls - before.calls) system calls, \(after.messages - before.messages) messages (\(before.calls) to start)")
            #expect(before.calls > 0)
            #expect(after.calls == before.calls, "the monitor made system calls while nothing changed")
            #expect(after.messages == before.messages)

            // The counter does count: one change costs reads (and the path moves).
            try await namespace.ip("address", "add", "10.77.1.1/24", "dev", "va")
            try await namespace.ip("route", "del", "default")
            _ = try await recorder.next(after: first) { $0.status == .unsatisfied }
            #expect(monitor.systemCalls > after.calls)
        }
    }

    @Test func forAwaitGivesTheCurrentPathThenChangesAndEndsOnCancel() async throws {
        try await Self.withUplink { namespace in
            let monitor = NWPathMonitor()
            // Started inside the namespace; iterating a started monitor does not start another.
            let recorder = try await Self.start(monitor, in: namespace)
            let first = try await recorder.next { _ in true }
            var iterator = monitor.makeAsyncIterator()
            #expect(await iterator.next() == first.path)
            try await namespace.ip("route", "del", "default")
            let next = await iterator.next()
            #expect(next?.status == .unsatisfied)
            monitor.cancel()
            #expect(await iterator.next() == nil)
        }
    }

    @Test func readmeConnectivityExampleRuns() async throws {
        try await Self.withUplink { namespace in
            let monitor = NWPathMonitor(prohibitedInterfaceTypes: [.cellular])
            defer { monitor.cancel() }
            try await namespace.inside { monitor.start(queue: DispatchQueue(label: "readme")) }
            NetworkInterfacePolicy.expensiveInterfaces.insert("vb")  // not the path's interface
            defer { NetworkInterfacePolicy.expensiveInterfaces.remove("vb") }
            let description = await readmeConnectivity(monitor)
            #expect(description == "online over va (other), expensive: false")
        }
    }
}

/// The updates a monitor delivered, in order, with when each arrived.
final class PathRecorder: Sendable {
    struct Update: Sendable {
        let index: Int
        let path: NWPath
        let arrival: ContinuousClock.Instant
    }

    private let updates = Locked<[Update]>([])

    func record(_ path: NWPath) {
        let now = ContinuousClock.now
        updates.withLock { $0.append(Update(index: $0.count, path: path, arrival: now)) }
    }

    var paths: [NWPath] { updates.withLock { $0.map(\.path) } }

    /// The statuses, with repeats in a row collapsed.
    var statuses: [NWPath.Status] {
        paths.map(\.status).reduce(into: []) { result, status in
            if result.last != status { result.append(status) }
        }
    }

    /// The first update after `previous` (from the start if nil) that matches; fails after 60 s.
    func next(after previous: Update? = nil, where match: (NWPath) -> Bool) async throws -> Update {
        let start = (previous?.index ?? -1) + 1
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let found = updates.withLock({ $0.dropFirst(start).first { match($0.path) } }) { return found }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw NamespaceFailure("no matching path update within 60 s; updates: \(paths.map(\.debugDescription))")
    }
}

/// Apple's NWPathMonitor example (its documentation and WWDC's), unchanged apart from the UI:
/// it compiles against `import Braid` and runs. Returns the monitor so the test can stop it.
func appleDocumentationExample() -> NWPathMonitor {
    let monitor = NWPathMonitor()
    monitor.pathUpdateHandler = { path in
        if path.status == .satisfied {
            print("We're connected!")
        } else {
            print("No connection.")
        }
        print(path.isExpensive)
        if path.usesInterfaceType(.wifi) {
            print("Wi-Fi")
        } else if path.usesInterfaceType(.cellular) {
            print("Cellular")
        }
    }
    let queue = DispatchQueue(label: "Monitor")
    monitor.start(queue: queue)
    return monitor
}

extension PathMonitorNamespaceTests {
    @Test func applesExampleRunsUnchanged() async throws {
        try await Self.withUplink { namespace in
            let monitor = try await namespace.inside { appleDocumentationExample() }
            defer { monitor.cancel() }
            let deadline = ContinuousClock.now + .seconds(60)
            while monitor.currentPath.status != .satisfied, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(monitor.currentPath.status == .satisfied, "\(monitor.currentPath)")
            #expect(monitor.queue?.label == "Monitor")
        }
    }

}
