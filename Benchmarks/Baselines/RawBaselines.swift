// Raw-socket baselines: the cheapest way this machine can move the same bytes (plain UDP, UDP with
// GSO/GRO, TCP, TCP + GnuTLS TLS 1.3) and the cost of a bare TCP / TLS connection setup. Each role
// runs in its own child process started by the harness, which measures its CPU and wall time, so a
// role does its socket calls and nothing else: blocking sockets, no polling, unbuffered output.
//
// Output protocol: servers first write `listening <port>`; every role writes one JSON object as
// the last line of stdout when done.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

enum RawBaselines {
    /// Runs a raw-baseline role in this (child) process; returns false if `role` is not one of ours.
    static func run(_ role: String, _ arguments: [String]) throws -> Bool {
        let body: (Options) throws -> Void
        switch role {
        case "raw-server": body = BulkServer.run
        case "raw-client": body = BulkClient.run
        case "raw-handshake-server": body = HandshakeServer.run
        case "raw-handshake-client": body = HandshakeClient.run
        default: return false
        }
        // A peer that goes away must surface as an error from send, not kill us silently.
        signal(SIGPIPE, SIG_IGN)
        // Failures are thrown with a message for stderr; the caller prints them and exits non-zero.
        try body(try Options(arguments))
        return true
    }
}

// MARK: - Shared plumbing

extension RawBaselines {
    /// A failure with a message meant for a person reading stderr.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }

        /// The failure of a system call, with `errno` spelled out.
        static func system(_ call: String, _ code: Int32 = errno) -> Failure {
            Failure("\(call) failed: \(String(cString: strerror(code))) (errno \(code))")
        }
    }

    /// What is being measured.
    enum Kind: String {
        /// One datagram per send / receive call.
        case udp
        /// Sender: UDP_SEGMENT, many datagrams per sendmsg. Receiver: UDP_GRO, recvmsg of up to 64 KiB.
        case udpGSO = "udp-gso"
        /// Plain TCP.
        case tcp
        /// TCP with GnuTLS TLS 1.3.
        case tls

        var isDatagram: Bool { self == .udp || self == .udpGSO }
    }

    /// `--flag value` pairs.
    struct Options {
        private var values: [String: String] = [:]

        init(_ arguments: [String]) throws {
            var index = 0
            while index < arguments.count {
                let flag = arguments[index]
                guard flag.hasPrefix("--"), flag.count > 2 else {
                    throw Failure("expected `--flag value` pairs, got \(flag.debugDescription) in \(arguments)")
                }
                guard index + 1 < arguments.count else { throw Failure("\(flag) needs a value") }
                values[String(flag.dropFirst(2))] = arguments[index + 1]
                index += 2
            }
        }

        func optional(_ name: String) -> String? { values[name] }

        func string(_ name: String) throws -> String {
            guard let value = values[name] else { throw Failure("missing --\(name)") }
            return value
        }

        func int(_ name: String, default fallback: Int? = nil) throws -> Int {
            guard let text = values[name] else {
                if let fallback { return fallback }
                throw Failure("missing --\(name)")
            }
            guard let value = Int(text), value >= 0 else { throw Failure("--\(name) \(text) is not a non-negative integer") }
            return value
        }

        func port(_ name: String = "port") throws -> UInt16 {
            let value = try int(name, default: 0)
            guard let port = UInt16(exactly: value) else { throw Failure("--\(name) \(value) is not a port") }
            return port
        }

        func kind(allowed: Set<Kind>? = nil) throws -> Kind {
            let text = try string("kind")
            guard let kind = Kind(rawValue: text), allowed?.contains(kind) ?? true else {
                let names = (allowed.map(Array.init) ?? [.udp, .udpGSO, .tcp, .tls]).map(\.rawValue).sorted()
                throw Failure("--kind \(text) is not one of \(names.joined(separator: ", "))")
            }
            return kind
        }
    }

    /// Writes one line to stdout, unbuffered (the harness reads lines as they come).
    static func writeLine(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    static func seconds(from start: UInt64, to end: UInt64) -> Double {
        Double(end &- start) / 1e9
    }

    /// A JSON number: integers as is, reals with enough digits and never NaN / infinity.
    static func jsonNumber(_ value: Double) -> String {
        value.isFinite ? String(format: "%.9f", value) : "0"
    }
}
