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

    /// The TCP port a child listens on, read from /proc: gnutls-serv does not print the port
    /// the system chose for `-p 0`, so every peer server is found the same way.
    /// The clients connect to 127.0.0.1, so only an IPv4 listener counts (every peer here
    /// listens on IPv4): gnutls-serv also opens an IPv6-only socket with a port of its own, and
    /// a start slowed by load once let that port be taken, which refused 127.0.0.1.
    static func listeningPort(of child: ChildProcess, within seconds: Double = 30) async throws -> UInt16 {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            // Before the exec completes, the child's descriptors include the test runner's
            // listeners (other tests', closed since in the runner but alive in the copy).
            if child.hasExecuted, let port = listeningIPv4Port(pid: child.pid) { return port }
            guard child.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw InteropFailure("\(child.commandLine) is not listening on TCP\nstdout: \(child.output)\nstderr: \(child.errors)")
    }

    private static func listeningIPv4Port(pid: pid_t) -> UInt16? {
        guard let inodes = socketInodes(of: pid), let text = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n").dropFirst() {
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9, fields[3] == "0A", inodes.contains(String(fields[9])),
                let portHex = fields[1].split(separator: ":").last, let port = UInt16(portHex, radix: 16)
            else { continue }
            return port
        }
        return nil
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

    /// The inode numbers of the sockets process `pid` has open.
    private static func socketInodes(of pid: pid_t) -> Set<String>? {
        let fdDirectory = "/proc/\(pid)/fd"
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: fdDirectory) else { return nil }
        var inodes = Set<String>()
        for descriptor in descriptors {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdDirectory)/\(descriptor)"),
                target.hasPrefix("socket:[")
            {
                inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
            }
        }
        return inodes
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
    func feed(_ bytes: [UInt8]) {
        Glibc.close(readEnd)
        let writeEnd = writeEnd
        let release = release
        let thread = Thread {
            // A child that exits before reading everything must not kill the test runner.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = Glibc.write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        break
                    }
                    offset += written
                }
            }
            release.wait()
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
