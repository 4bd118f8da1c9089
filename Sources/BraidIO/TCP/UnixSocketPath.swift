import BraidCore
// For <sys/socket.h>: SOCK_* and MSG_* (Glibc's module does not give every file its socket types).
import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// Where a Unix-domain socket lives: a path in the file system (not Linux's abstract
/// namespace), which fits `sockaddr_un`'s 108 bytes with its terminating NUL.
package struct UnixSocketPath: Sendable, Hashable, CustomStringConvertible {
    /// The longest path `sockaddr_un` holds, in bytes (UTF-8).
    package static let maximumLength = 107

    package let path: String

    /// Throws `DatapathError.system` with ENAMETOOLONG for a path longer than
    /// `maximumLength` bytes, EINVAL for an empty one or one with a NUL byte.
    package init(_ path: String) throws {
        let length = path.utf8.count
        guard length <= Self.maximumLength else {
            throw DatapathError.system("Unix-domain socket path (\(length) bytes, at most \(Self.maximumLength))", ENAMETOOLONG)
        }
        guard length > 0, !path.utf8.contains(0) else {
            throw DatapathError.system("Unix-domain socket path \"\(path)\"", EINVAL)
        }
        self.path = path
    }

    package var description: String { path }

    /// Calls `body` with the `sockaddr_un` for the path and its length.
    package func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        return try withUnsafePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, length) }
        }
    }

    /// Removes a socket file at the path that nobody holds any more (a connect to it is
    /// refused: its server is gone), as a restarted server expects; returns the system calls
    /// made. Throws EADDRINUSE when a socket someone holds is there (for `type` SOCK_STREAM, a
    /// listener; SOCK_DGRAM, a bound socket), and when the file is not a socket: Braid never
    /// removes a regular file or a directory.
    package func removeStaleSocketFile(type: Int32) throws -> UInt64 {
        var status = stat()
        guard lstat(path, &status) == 0 else { return 1 }  // nothing there: bind says the rest
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw DatapathError.system("bind(\(path)): a file that is not a socket is there (Braid never removes one)", EADDRINUSE)
        }
        let probe = socket(AF_UNIX, type | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { throw DatapathError.system("socket(AF_UNIX)", errno) }
        defer { close(probe) }
        let connected = withSockAddr { connect(probe, $0, $1) }
        let error = connected == 0 ? 0 : errno
        // Connected, or a full backlog (EAGAIN): someone holds it.
        guard error == ECONNREFUSED else {
            if error == 0 || error == EAGAIN {
                throw DatapathError.system("bind(\(path)): another socket is bound to this socket file", EADDRINUSE)
            }
            throw DatapathError.system("connect(\(path)) to check for a server", error)
        }
        guard unlink(path) == 0 || errno == ENOENT else { throw DatapathError.system("unlink(\(path))", errno) }
        return 5
    }

    /// The file's device and inode, if it is a socket (`lstat`); nil when there is no file or
    /// it is something else.
    package func socketFileIdentity() -> (device: UInt64, inode: UInt64)? {
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }
}
