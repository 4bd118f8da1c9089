import BraidPerf
import Foundation
import Testing

/// The avahi-daemon back end against the daemon's own tools and against the embedded engine.
///
/// Each test owns its daemon and its links: two network namespaces joined by a veth pair, the
/// daemon publishing on the end in `daemonSide`, and the other end in `peerSide`. The `braid`
/// tool plays Braid, with `BRAID_DISCOVERY_BACKEND` choosing its back end: through the daemon
/// it runs in the test's own namespace and reaches the daemon over its private bus (so a
/// fallback to the embedded engine there would find and reach nothing, and cannot pass for
/// the daemon); embedded, it runs in `peerSide`, across the veth from the daemon.
@Suite(.serialized)
struct AvahiBackendTests {
    /// Runs `body` with the daemon's namespace, the peer's, and the daemon.
    func withDaemon(_ body: (NetworkNamespace, NetworkNamespace, AvahiDaemon) async throws -> Void) async throws {
        try AvahiDaemon.requireTools()
        try await NetworkNamespace.with { daemonSide in
            try await NetworkNamespace.with { peerSide in
                try await daemonSide.addVethPair("av0", address: "10.77.0.1", peer: "em0", peerAddress: "10.77.0.2", peerNamespace: peerSide)
                try await AvahiDaemon.with(in: daemonSide, interface: "av0") { daemon in
                    try await body(daemonSide, peerSide, daemon)
                }
            }
        }
    }

    func braid(
        _ daemon: AvahiDaemon, backend: String, _ arguments: [String], in namespace: NetworkNamespace? = nil, standardInput: Int32? = nil
    ) throws -> ChildProcess {
        try daemon.run(try PeerProcess.braidTool, arguments, environment: ["BRAID_DISCOVERY_BACKEND=\(backend)"], in: namespace, standardInput: standardInput)
    }

    static func uniqueName(_ what: String) -> String { "\(what) \(String(UInt32.random(in: 0...UInt32.max), radix: 16))" }

    /// The fields of avahi-browse's resolved ("=") line for `name`: interface, protocol, name,
    /// type, domain, host, address, port, TXT. avahi-browse -rpt prints what the daemon knows
    /// and exits, so it is asked again until it knows the service resolved (and, with
    /// `accepting`, until the line is one `accepting` takes).
    static func resolvedByAvahiBrowse(
        _ daemon: AvahiDaemon, type: String, name: String, accepting: ([String]) -> Bool = { _ in true }
    ) async throws -> [String] {
        let escaped = name.replacingOccurrences(of: " ", with: "\\032")
        let end = ContinuousClock.now + .seconds(60)
        var last = ""
        while ContinuousClock.now < end {
            let browse = try daemon.run("/usr/bin/avahi-browse", ["-rpt", type])
            try await browse.finish(within: 60)
            last = browse.output + browse.errors
            for line in browse.output.split(separator: "\n") where line.hasPrefix("=") {
                let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
                if fields.count >= 10, fields[3] == escaped, accepting(fields) { return fields }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw NamespaceFailure("avahi-browse -rpt \(type) never listed \(name) resolved as expected; last output: \(last)")
    }

    /// Waits until the advertiser has reported `name` unregistered and then registered again.
    static func waitForReregistration(of name: String, by advertiser: ChildProcess, describe: @escaping @Sendable () -> String) async throws {
        try await waitUntil("the service withdrawn and registered again", describe: describe) {
            let lines = advertiser.jsonLines
            guard let lapse = lines.firstIndex(where: { $0["unregistered"] as? String == name }) else { return false }
            return lines[lapse...].contains { $0["registered"] as? String == name }
        }
    }

    @Test func braidAdvertiserThroughAvahiIsFoundByAvahiBrowse() async throws {
        try await withDaemon { _, _, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Braid via Avahi")
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name, "--txt", "players=4"])
            let listening = try await advertiser.jsonLine(within: 60) { $0["listening"] != nil }
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let fields = try await Self.resolvedByAvahiBrowse(daemon, type: type, name: name)
            #expect(fields[4] == type)
            #expect(fields[8] == "\(listening["listening"] as? Int ?? -1)")
            #expect(fields[9].contains("\"players=4\""))
            await advertiser.stop()
        }
    }

    @Test func avahiPublishedServiceIsFoundByBraidBrowserThroughAvahi() async throws {
        try await withDaemon { _, _, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("From avahi-publish")
            let publisher = try daemon.run("/usr/bin/avahi-publish", ["-s", name, type, "4242", "colour=blue"])
            try await waitUntil("avahi-publish to establish \(name)", describe: { publisher.errors }) {
                publisher.output.contains("Established") || publisher.errors.contains("Established")
            }
            let browser = try braid(daemon, backend: "avahi", ["browse", type])
            let found = try await browser.jsonLine(within: 60) { $0["found"] as? String == name && ($0["txt"] as? [String: String])?["colour"] == "blue" }
            #expect(found["type"] as? String == type)
            await publisher.stop()
            _ = try await browser.jsonLine(within: 60) { $0["lost"] as? String == name }
            await browser.stop()
        }
    }

    @Test func avahiAdvertiserIsFoundByEmbeddedBrowserInAnotherNamespace() async throws {
        try await withDaemon { _, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Avahi to embedded")
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name, "--txt", "via=avahi"])
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let browser = try braid(daemon, backend: "embedded", ["browse", type], in: peerSide)
            _ = try await browser.jsonLine(within: 90) { $0["found"] as? String == name && ($0["txt"] as? [String: String])?["via"] == "avahi" }
            await advertiser.stop()
            await browser.stop()
        }
    }

    @Test func embeddedAdvertiserInAnotherNamespaceIsFoundThroughAvahi() async throws {
        try await withDaemon { _, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Embedded to avahi")
            let advertiser = try braid(daemon, backend: "embedded", ["advertise", type, "--name", name, "--txt", "via=embedded"], in: peerSide)
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let browser = try braid(daemon, backend: "avahi", ["browse", type])
            _ = try await browser.jsonLine(within: 90) { $0["found"] as? String == name && ($0["txt"] as? [String: String])?["via"] == "embedded" }
            await advertiser.stop()
            await browser.stop()
        }
    }

    /// A name another program holds in the daemon: Avahi's alternative name ("Name #2"), reported
    /// as the service's registration.
    @Test func nameHeldOnTheHostIsRenamedThroughAvahi() async throws {
        try await withDaemon { _, _, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Taken")
            let holder = try daemon.run("/usr/bin/avahi-publish", ["-s", name, type, "4242"])
            try await waitUntil("avahi-publish to establish \(name)", describe: { holder.errors }) {
                holder.output.contains("Established") || holder.errors.contains("Established")
            }
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name])
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == "\(name) #2" }
            #expect(!advertiser.jsonLines.contains { $0["registered"] as? String == name })
            await advertiser.stop()
            await holder.stop()
        }
    }

    /// A name an embedded responder across the link holds: the daemon's probe meets it, the
    /// entry group collides, and the service comes back under Avahi's alternative name.
    @Test func nameHeldOnTheNetworkIsRenamedThroughAvahi() async throws {
        try await withDaemon { _, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Contested")
            let holder = try braid(daemon, backend: "embedded", ["advertise", type, "--name", name], in: peerSide)
            _ = try await holder.jsonLine(within: 60) { $0["registered"] as? String == name }
            // The daemon must know the holder's records before it probes, or both could win
            // in turn: wait until a browse through it lists the name.
            let browser = try braid(daemon, backend: "avahi", ["browse", type])
            _ = try await browser.jsonLine(within: 90) { $0["found"] as? String == name }
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name])
            _ = try await advertiser.jsonLine(within: 90) { $0["registered"] as? String == "\(name) #2" }
            await advertiser.stop()
            await browser.stop()
            await holder.stop()
        }
    }

    /// The daemon stops while a browse runs through it: the browse moves to the embedded engine,
    /// reporting the service lost, then found again by multicast DNS of its own.
    @Test func browseFallsBackToEmbeddedWhenTheDaemonStops() async throws {
        try await withDaemon { _, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Outlives the daemon")
            let advertiser = try braid(daemon, backend: "embedded", ["advertise", type, "--name", name], in: peerSide)
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            // In the peer's namespace, so that once it falls back its own multicast DNS is on
            // the advertiser's link.
            let browser = try braid(daemon, backend: "auto", ["browse", type], in: peerSide)
            _ = try await browser.jsonLine(within: 90) { $0["found"] as? String == name }
            try await daemon.daemon.stop(within: 20)
            _ = try await browser.jsonLine(within: 60) { $0["lost"] as? String == name }
            try await waitUntil("the browse to find \(name) again after the fallback", describe: { browser.output + browser.errors }) {
                let lines = browser.output.split(separator: "\n")
                guard let lost = lines.lastIndex(where: { $0.contains("\"lost\"") }) else { return false }
                return lines[lost...].contains { $0.contains("\"found\":\"\(name)\"") }
            }
            await advertiser.stop()
            await browser.stop()
        }
    }

    @Test func forcedAvahiWithoutADaemonFailsWithTheReason() async throws {
        let child = try ChildProcess(
            "/usr/bin/env",
            ["DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/braid-bus", "BRAID_DISCOVERY_BACKEND=avahi", try PeerProcess.braidTool, "browse", uniqueServiceType()])
        let exit = try await child.finish(within: 60)
        #expect(exit.status == 1)
        #expect(child.errors.contains("avahi-daemon"), "stderr: \(child.errors)")
        #expect(child.errors.contains("BRAID_DISCOVERY_BACKEND"), "stderr: \(child.errors)")
    }

    @Test func unknownBackendNameFailsWithTheChoices() async throws {
        let child = try ChildProcess("/usr/bin/env", ["BRAID_DISCOVERY_BACKEND=bonjour", try PeerProcess.braidTool, "browse", uniqueServiceType()])
        let exit = try await child.finish(within: 60)
        #expect(exit.status == 1)
        #expect(child.errors.contains("auto, avahi or embedded"), "stderr: \(child.errors)")
    }

    /// A pipe for a child's standard input: the read end (given to the child) and the write end
    /// (the test's), both close-on-exec so no other child inherits them (posix_spawn's dup2 of
    /// the read end onto the child's standard input clears the flag there).
    static func inputPipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw NamespaceFailure("pipe: errno \(errno)") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    /// A new TXT record through the daemon is an update of the entry group's service
    /// (avahi_entry_group_update_service_txt_strlst): a browser across the link sees the new
    /// record and never loses the service, and the advertiser's registration never lapses.
    @Test func aNewTXTRecordIsUpdatedInPlaceThroughAvahi() async throws {
        try await withDaemon { _, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("TXT via Avahi")
            let input = try Self.inputPipe()
            defer { close(input.write) }
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name, "--txt", "round=1", "--txt-from-stdin"], standardInput: input.read)
            close(input.read)
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let browser = try braid(daemon, backend: "embedded", ["browse", type], in: peerSide)
            _ = try await browser.jsonLine(within: 90) { $0["found"] as? String == name && ($0["txt"] as? [String: String])?["round"] == "1" }
            let line = Array("round=2\n".utf8)
            #expect(write(input.write, line, line.count) == line.count)
            _ = try await browser.jsonLine(within: 60) { $0["found"] as? String == name && ($0["txt"] as? [String: String])?["round"] == "2" }
            #expect(!browser.jsonLines.contains { $0["lost"] as? String == name }, "browser: \(browser.output)")
            #expect(!advertiser.jsonLines.contains { $0["unregistered"] != nil }, "advertiser: \(advertiser.output)")
            #expect(advertiser.jsonLines.filter { $0["registered"] != nil }.count == 1, "advertiser: \(advertiser.output)")
            // And the daemon itself holds the new record.
            let fields = try await Self.resolvedByAvahiBrowse(daemon, type: type, name: name)
            #expect(fields[9].contains("\"round=2\""), "avahi-browse: \(fields)")
            await advertiser.stop()
            await browser.stop()
        }
    }

    /// A listener advertised through the daemon, reached by name from across the link with the
    /// `.service` endpoint resolved through the daemon too: `braid connect` (NWConnection to
    /// `.service(name:type:domain:interface:)`) sends text and gets its echo.
    @Test func aServiceAdvertisedThroughAvahiIsReachedByNameResolvedThroughAvahi() async throws {
        try await withDaemon { daemonSide, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Echo via Avahi")
            // In the daemon's namespace, so the address the daemon publishes (av0's) is the
            // listener's.
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name], in: daemonSide)
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let connect = try braid(daemon, backend: "avahi", ["connect", name, type, "--send", "over avahi", "--timeout", "60"], in: peerSide)
            let exit = try await connect.finish(within: 90)
            #expect(exit.status == 0, "braid connect: \(connect.output) \(connect.errors)")
            let reply = connect.jsonLines.first ?? [:]
            #expect(reply["received"] as? String == "over avahi", "braid connect: \(connect.output) \(connect.errors)")
            await advertiser.stop()
        }
    }

    /// The daemon registers a new host name (avahi-set-host-name: the daemon goes through
    /// REGISTERING, as after a host-name collision): the service is withdrawn while it does,
    /// reported `unregistered`, and added again once the daemon runs, its SRV record now naming
    /// the new host.
    @Test func aNewDaemonHostNameReregistersTheServiceThroughAvahi() async throws {
        try await withDaemon { _, _, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Outlives the host name")
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name])
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let before = try await Self.resolvedByAvahiBrowse(daemon, type: type, name: name)
            let host = "braid-renamed-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
            #expect(before[6] != "\(host).local")
            let rename = try daemon.run("/usr/bin/avahi-set-host-name", [host])
            let renamed = try await rename.finish(within: 60)
            #expect(renamed.status == 0, "avahi-set-host-name: \(rename.output) \(rename.errors)")
            try await Self.waitForReregistration(of: name, by: advertiser, describe: { advertiser.output })
            let after = try await Self.resolvedByAvahiBrowse(daemon, type: type, name: name) { $0[6] == "\(host).local" }
            #expect(after[6] == "\(host).local", "resolved: \(after)")
            await advertiser.stop()
        }
    }

    /// Two daemons claim one host name on one link (both take the machine's): the one Braid
    /// registers through comes back to the link after the other took the name, collides
    /// (AVAHI_CLIENT_S_COLLISION), takes another host name, and Braid's service is withdrawn
    /// and added again under it.
    @Test func aHostNameCollisionOfTheDaemonReregistersTheService() async throws {
        try await withDaemon { daemonSide, peerSide, daemon in
            let type = uniqueServiceType(), name = Self.uniqueName("Outlives a collision")
            let advertiser = try braid(daemon, backend: "avahi", ["advertise", type, "--name", name])
            _ = try await advertiser.jsonLine(within: 60) { $0["registered"] as? String == name }
            let before = try await Self.resolvedByAvahiBrowse(daemon, type: type, name: name)
            // The link goes down: the other daemon claims the same name unopposed.
            _ = try await daemonSide.setLink("av0", up: false)
            try await AvahiDaemon.with(in: peerSide, interface: "em0") { other in
                try await waitUntil("the other daemon to hold the host name", describe: { other.daemon.output + other.daemon.errors }) {
                    (other.daemon.output + other.daemon.errors).contains("Server startup complete")
                }
                _ = try await daemonSide.setLink("av0", up: true)
                try await Self.waitForReregistration(of: name, by: advertiser, describe: { advertiser.output + "\n" + daemon.daemon.errors })
                let after = try await Self.resolvedByAvahiBrowse(daemon, type: type, name: name) { $0[6] != before[6] }
                #expect(after[6] != before[6], "resolved: \(after); daemon: \(daemon.daemon.errors)")
                // The daemon's own account: its host name collided (not merely re-registered).
                #expect((daemon.daemon.output + daemon.daemon.errors).contains("Host name conflict"), "daemon: \(daemon.daemon.errors)")
            }
            await advertiser.stop()
        }
    }
}
