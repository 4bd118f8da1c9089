import BraidCore
import Glibc

/// A TCP port held closed: a socket bound to `address` that never listens, so a connect there
/// is refused, and no other test's listener can take the port meanwhile (the suite runs its
/// tests in parallel, and a port free now may be listened on a moment later).
final class ClosedTCPPort {
    private let fd: Int32

    /// Nil when the port is in use already (or no socket could be made).
    init?(_ address: SocketAddress) {
        let fd = socket(address.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        guard address.withSockAddr({ bind(fd, $0, socklen_t($1)) }) == 0 else {
            Glibc.close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { Glibc.close(fd) }
}
