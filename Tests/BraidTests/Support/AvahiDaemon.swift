import BraidPerf
import Foundation
import Glibc

/// An avahi-daemon a test owns: it runs in a network namespace of the test's (so it sees only
/// the links the test makes) and registers on a D-Bus system bus of its own, a dbus-daemon
/// listening on a socket file in a temporary directory. A socket file is reachable from every
/// network namespace (only abstract sockets belong to one), so clients anywhere on the machine
/// reach this daemon with `DBUS_SYSTEM_BUS_ADDRESS` set to `busAddress`; the machine's own
/// bus and daemon, if any, are never touched.
///
/// Needs root, iproute2, dbus-daemon, avahi-daemon and avahi-utils (tools/install-deps.sh
/// installs them); without one, `start` throws and the test fails with the reason.
final class AvahiDaemon: Sendable {
    let directory: URL
    let busAddress: String
    let bus: ChildProcess
    let daemon: ChildProcess

    private init(directory: URL, busAddress: String, bus: ChildProcess, daemon: ChildProcess) {
        self.directory = directory
        self.busAddress = busAddress
        self.bus = bus
        self.daemon = daemon
    }

    /// The programs the tests run, checked up front so a missing one fails with its fix.
    static func requireTools() throws {
        for tool in ["/usr/bin/dbus-daemon", "/usr/sbin/avahi-daemon", "/usr/bin/avahi-browse", "/usr/bin/avahi-publish", "/usr/sbin/ip", "/usr/bin/env"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw NamespaceFailure("\(tool) is missing: run tools/install-deps.sh (it installs dbus-daemon, avahi-daemon, avahi-utils and iproute2)")
        }
        guard getuid() == 0 else { throw NamespaceFailure("the avahi-daemon tests need root (network namespaces, a private avahi-daemon)") }
    }

    /// Starts a bus and a daemon publishing on `interface` in `namespace`, runs `body`, and
    /// stops both.
    static func with<T: Sendable>(in namespace: NetworkNamespace, interface: String, _ body: (AvahiDaemon) async throws -> T) async throws -> T {
        try requireTools()
        let directory = URL(fileURLWithPath: "/tmp/braid-avahi-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("bus").path
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.write(to: directory.appendingPathComponent("bus.conf"), atomically: true, encoding: .utf8)
        try """
            [server]
            use-ipv4=yes
            use-ipv6=no
            allow-interfaces=\(interface)
            enable-dbus=yes
            ratelimit-interval-usec=1000000
            ratelimit-burst=1000
            [wide-area]
            enable-wide-area=no
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """.write(to: directory.appendingPathComponent("avahi-daemon.conf"), atomically: true, encoding: .utf8)
        let bus = try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(directory.path)/bus.conf", "--nofork", "--nopidfile"])
        let busAddress = "unix:path=\(socket)"
        try await waitFor("the D-Bus socket \(socket)", process: bus) { FileManager.default.fileExists(atPath: socket) }
        // `ip netns exec` gives the command a mount namespace of its own: the tmpfs over
        // /run/avahi-daemon (the daemon's fixed PID file and socket directory) is the daemon's
        // alone, so it runs beside the machine's daemon or another test's.
        let daemon = try ChildProcess(
            "/usr/sbin/ip",
            ["netns", "exec", namespace.name, "/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=\(busAddress)", "/bin/sh", "-c",
             "mkdir -p /run/avahi-daemon && mount -t tmpfs tmpfs /run/avahi-daemon && exec /usr/sbin/avahi-daemon --no-drop-root --no-chroot --no-rlimits -f \(directory.path)/avahi-daemon.conf"])
        let running = AvahiDaemon(directory: directory, busAddress: busAddress, bus: bus, daemon: daemon)
        do {
            try await waitFor("avahi-daemon to start", process: daemon) {
                (daemon.output + daemon.errors).contains("Server startup complete")
            }
            let result = try await body(running)
            await running.stop()
            return result
        } catch {
            await running.stop()
            throw error
        }
    }

    func stop() async {
        _ = try? await daemon.stop(within: 20)
        _ = try? await bus.stop(within: 20)
    }

    /// A program run with this daemon's bus as the system bus (and `environment` besides), in
    /// `namespace` if given.
    /// `standardInput`, if given, is the descriptor the program reads as its standard input.
    func run(
        _ executable: String, _ arguments: [String], environment: [String] = [], in namespace: NetworkNamespace? = nil,
        standardInput: Int32? = nil
    ) throws -> ChildProcess {
        let command = ["/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=\(busAddress)"] + environment + [executable] + arguments
        if let namespace { return try ChildProcess("/usr/sbin/ip", ["netns", "exec", namespace.name] + command, standardInput: standardInput) }
        return try ChildProcess(command[0], Array(command.dropFirst()), standardInput: standardInput)
    }

    private static func waitFor(_ what: String, process: ChildProcess, deadline: Duration = .seconds(60), _ condition: () -> Bool) async throws {
        let end = ContinuousClock.now + deadline
        while ContinuousClock.now < end {
            if condition() { return }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw NamespaceFailure("timed out waiting for \(what) (\(process.commandLine) \(process.isRunning ? "runs" : "exited"); stdout: \(process.output); stderr: \(process.errors))")
    }
}
