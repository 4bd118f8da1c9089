#if canImport(Glibc)
import Glibc
#endif

/// SO_BINDTODEVICE: a socket bound to an interface sends only through it (route lookups are
/// limited to its routes) and receives only what arrives on it. How a connection's interface
/// parameters (`requiredInterface`, `expensivePathsProhibited`, ...) hold on Linux. Since
/// Linux 5.7 an unprivileged process may bind a socket that is not bound to a device yet.
package enum SocketDevice {
    /// Binds `fd` to the interface named `name` (before bind and connect, so the kernel's
    /// source-address choice and route lookups see it).
    package static func bind(_ fd: Int32, to name: String) throws {
        // A name is at most IFNAMSIZ - 1 bytes; the kernel rejects longer ones with EINVAL too.
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count < 16 else { throw DatapathError.system("setsockopt(SO_BINDTODEVICE \(name))", EINVAL) }
        let result = bytes.withUnsafeBytes { setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, $0.baseAddress, socklen_t($0.count)) }
        guard result == 0 else { throw DatapathError.system("setsockopt(SO_BINDTODEVICE \(name))", errno) }
    }

    /// The interface `fd` is bound to (nil: none), read back with getsockopt.
    package static func boundDevice(of fd: Int32) -> String? {
        var name = [UInt8](repeating: 0, count: 16)
        var length = socklen_t(name.count)
        let result = name.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, $0.baseAddress, &length) }
        guard result == 0, length > 0 else { return nil }
        let text = String(decoding: name.prefix(Int(length)).prefix { $0 != 0 }, as: UTF8.self)
        return text.isEmpty ? nil : text
    }
}
