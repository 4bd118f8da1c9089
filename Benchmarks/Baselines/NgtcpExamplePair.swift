// ngtcp2's example HTTP/3 server and client, GnuTLS build (Debian's ngtcp2-server and ngtcp2-client
// packages install them as /usr/sbin/gtlsserver and /usr/bin/gtlsclient, version 0.12.1).
//
// The server serves files from a document root (`-d`); the client fetches URIs and, without
// `--download`, discards the bodies; `--exit-on-all-streams-close` makes it exit (status 0) when
// its request is done. `-q` silences both, except for a line or two on the server's stderr.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// ngtcp2's own example client and server (GnuTLS build), as an external reference for a bulk download.
enum NgtcpExamplePair {
    static let serverCandidates = ["/usr/sbin/gtlsserver", "/usr/bin/gtlsserver", "/usr/local/bin/gtlsserver"]
    static let clientCandidates = ["/usr/bin/gtlsclient", "/usr/sbin/gtlsclient", "/usr/local/bin/gtlsclient"]
    /// Name of the file served.
    static let fileName = "payload"

    /// Paths of the two programs if installed.
    static var programs: (server: String, client: String)? {
        let manager = FileManager.default
        guard let server = serverCandidates.first(where: manager.isExecutableFile(atPath:)),
            let client = clientCandidates.first(where: manager.isExecutableFile(atPath:))
        else { return nil }
        return (server, client)
    }

    /// Prepares a document root with a file of `bytes` bytes; returns the argv of the server for `port`, a function giving the client's argv for a port, and a cleanup.
    static func prepare(bytes: Int, certificate: String, key: String) throws -> (
        server: (UInt16) -> [String], client: (UInt16) -> [String], cleanup: () -> Void
    ) {
        guard let (serverPath, clientPath) = programs else {
            throw Failure("ngtcp2's example programs (gtlsserver, gtlsclient) are not installed")
        }
        guard bytes >= 0 else { throw Failure("negative file size \(bytes)") }
        let root = try makeTemporaryDirectory()
        do {
            try writeFile(at: root + "/" + fileName, bytes: bytes)
        } catch {
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }

        let server: (UInt16) -> [String] = { port in
            [serverPath, "-q", "-d", root, "127.0.0.1", String(port), key, certificate]
        }
        let client: (UInt16) -> [String] = { port in
            [
                clientPath, "-q", "--exit-on-all-streams-close",
                "127.0.0.1", String(port), "https://127.0.0.1:\(port)/\(fileName)",
            ]
        }
        return (server, client, { try? FileManager.default.removeItem(atPath: root) })
    }

    private static func makeTemporaryDirectory() throws -> String {
        var template = Array((URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("braid-ngtcp2-htdocs-XXXXXX").path).utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure("mkdtemp: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    private static func writeFile(at path: String, bytes: Int) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x61, count: min(bytes, 1 << 20))
        var remaining = bytes
        try chunk.withUnsafeBytes { buffer in
            while remaining > 0 {
                let written = write(fd, buffer.baseAddress, min(buffer.count, remaining))
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Failure("write \(path): \(String(cString: strerror(errno)))")
                }
                remaining -= written
            }
        }
    }
}

extension NgtcpExamplePair {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
