import BraidPerf
import Foundation
import Glibc
import Synchronization
import Testing

/// The independent TLS implementations Braid's TLS over TCP is tested against: GnuTLS's and
/// OpenSSL's command-line tools, and `Tests/Interop/peers/tls_peer.py` on Python's `ssl`.
enum TLSPeer: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case gnutls = "GnuTLS (gnutls-serv/gnutls-cli)"
    case openssl = "OpenSSL (s_server/s_client)"
    case python = "Python ssl (tls_peer.py)"

    var testDescription: String { rawValue }

    /// The peer's server tool, found on PATH (a missing one fails the test, naming its package).
    var serverTool: String {
        get throws {
            switch self {
            case .gnutls: try TLSPeerTools.find("gnutls-serv", package: "gnutls-bin")
            case .openssl: try TLSPeerTools.find("openssl", package: "openssl")
            case .python: try TLSPeerTools.find("python3", package: "python3")  // the ssl module alone
            }
        }
    }

    /// The peer's client tool.
    var clientTool: String {
        get throws {
            switch self {
            case .gnutls: try TLSPeerTools.find("gnutls-cli", package: "gnutls-bin")
            case .openssl: try TLSPeerTools.find("openssl", package: "openssl")
            case .python: try TLSPeerTools.find("python3", package: "python3")  // the ssl module alone
            }
        }
    }
}

enum TLSPeerTools {
    static var tlsPeerScript: String { PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/tls_peer.py").path }

    /// The executable `name` on PATH; throws naming the Debian package that installs it.
    static func find(_ name: String, package: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw InteropFailure("\(name) is not installed: it comes with the Debian package \(package) (tools/install-deps.sh installs it)")
    }

    /// A port for a peer server that must be told its port: from 20000-32000, below the
    /// kernel's ephemeral range, so no client socket of a concurrent test is given it. Another
    /// process may hold it all the same: the peer then says so, and gets another.
    static func candidatePort() -> UInt16 { UInt16.random(in: 20000..<32000) }

    /// What a peer server said about the port it was told to listen on.
    enum PortOutcome {
        case listening
        /// Another socket has the port: start again on another.
        case taken
    }

    /// Waits (generously: a loaded machine starts a process slowly) until `child` says what
    /// became of its port: `outcome` reads that from the child's output (nil: nothing yet).
    /// Checked once more after the deadline, so a wait that was itself delayed past it still
    /// sees what happened meanwhile.
    static func portOutcome(
        of child: ChildProcess, within seconds: Int = 60, _ outcome: () -> PortOutcome?
    ) async throws -> PortOutcome {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let pastDeadline = ContinuousClock.now >= deadline
            let running = child.isRunning
            if let outcome = outcome() { return outcome }
            guard running else {
                throw InteropFailure("\(child.commandLine) exited before listening\nstdout: \(child.output)\nstderr: \(child.errors)")
            }
            guard !pastDeadline else {
                throw InteropFailure(
                    "\(child.commandLine) did not listen within \(seconds) s\nstdout: \(child.output)\nstderr: \(child.errors)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// gnutls-serv says on stderr (unbuffered) how each of its sockets fared: IPv4 first, then
    /// IPv6, each `... port P...done` once bound and listening, or `...bind() failed: ...`.
    /// Clients connect to 127.0.0.1, so only the IPv4 socket counts.
    static func gnutlsServerOutcome(_ process: ChildProcess, port: UInt16) -> TLSPeerTools.PortOutcome? {
        let errors = process.errors
        if errors.contains("listening on IPv4 0.0.0.0 port \(port)...done") { return .listening }
        if errors.contains("listening on IPv4 0.0.0.0 port \(port)...bind() failed") { return .taken }
        return nil
    }

    /// Whether a TCP socket listens on `port` of 127.0.0.1 or of any address, IPv4 or IPv6
    /// (/proc/net/tcp and tcp6: `sl local_address rem_address st ...`, the port in hex after
    /// the address, state 0A for LISTEN).
    static func isListening(tcpPort port: UInt16, anyAddress: Bool) -> Bool {
        let suffix = String(format: ":%04X", port)
        let tables = anyAddress ? ["/proc/net/tcp", "/proc/net/tcp6"] : ["/proc/net/tcp"]
        for table in tables {
            let text = (try? String(contentsOfFile: table, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 3, fields[3] == "0A", fields[1].hasSuffix(suffix) else { continue }
                if anyAddress || fields[1] == "0100007F\(suffix)" { return true }
            }
        }
        return false
    }

    /// Diagnostics: what process `pid` has open, and its name.
    static func describeDescriptors(of pid: pid_t) -> String {
        let fdDirectory = "/proc/\(pid)/fd"
        let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? "?"
        let targets = ((try? FileManager.default.contentsOfDirectory(atPath: fdDirectory)) ?? []).sorted().map { descriptor in
            "\(descriptor)=\((try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdDirectory)/\(descriptor)")) ?? "?")"
        }
        return "comm \(comm): " + targets.joined(separator: " ")
    }
}

/// A pipe whose read end becomes a child's standard input. A thread of its own writes the
/// bytes, then keeps the pipe open until `close()`: gnutls-cli, s_client and s_server (when
/// not quiet) end the connection at the end of their input, which would cut a transfer short.
final class InputPipe: Sendable {
    /// The descriptor to hand to `ChildProcess(standardInput:)`.
    let readEnd: Int32
    private let writeEnd: Int32
    private let release = DispatchSemaphore(value: 0)

    init() throws {
        var ends: [Int32] = [0, 0]
        // pipe2 is not visible from Swift's Glibc; other children spawned in the moment before
        // FD_CLOEXEC is set would inherit the ends, which only delays their end of input.
        guard pipe(&ends) == 0 else { throw InteropFailure("pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    /// Starts writing `bytes` (the child reads them at its pace); the write end stays open
    /// until `close()`. Call after starting the child, whose copy of the read end is its own.
    /// With `interval`, writes them again every `interval` seconds until `close()`: a line a
    /// DTLS peer sends as one record is lost for good if the datagram is (DTLS does not resend
    /// application data), and loopback drops datagrams when other tests flood it.
    func feed(_ bytes: [UInt8], repeatingEvery interval: Double? = nil) {
        Glibc.close(readEnd)
        let writeEnd = writeEnd
        let release = release
        let thread = Thread {
            // A child that exits before reading everything must not kill the test runner.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            func writeAll() -> Bool {
                bytes.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = Glibc.write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                        if written < 0 {
                            if errno == EINTR { continue }
                            return false
                        }
                        offset += written
                    }
                    return true
                }
            }
            if writeAll(), let interval {
                while release.wait(timeout: .now() + interval) == .timedOut, writeAll() {}
            } else {
                release.wait()
            }
            Glibc.close(writeEnd)
        }
        thread.start()
    }

    /// Ends the child's input (once everything was written or the child is gone).
    func close() { release.signal() }
}

/// Printable bytes with a newline every 64: gnutls-serv's echo mode handles its input as
/// text (NUL bytes end it), so what goes through it must be text. Deterministic, so a moved
/// or lost piece is detected.
func textPattern(count: Int) -> [UInt8] {
    (0..<count).map { (index: Int) -> UInt8 in
        if index % 64 == 63 { return 10 }
        let letter: Int = (index * 7 + index / 64) % 26
        return UInt8(65 + letter)
    }
}
