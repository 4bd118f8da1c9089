import Glibc

@testable import Braid
import BraidCore

/// A TCP address that neither accepts nor refuses: a listener with a backlog of one, whose
/// queue a connection nobody accepts fills, so the kernel drops every further SYN and the
/// client retransmits until its timeout, as toward a host that went silent.
final class SilentTCPPort {
    private var descriptors: [Int32] = []

    /// Listens on `address` (an IPv4 literal) at `port` and fills the queue.
    init(address: String, port: UInt16) throws {
        guard let target = SocketAddress(ip: address, port: port) else {
            throw NetworkError.invalidConfiguration("\(address) is not an IP address")
        }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        descriptors.append(listener)
        guard target.withSockAddr({ bind(listener, $0, socklen_t($1)) }) == 0, listen(listener, 0) == 0 else {
            throw NetworkError.system(call: "bind/listen(\(target))", errno: errno)
        }
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        descriptors.append(filler)
        guard target.withSockAddr({ connect(filler, $0, socklen_t($1)) }) == 0 else {
            throw NetworkError.system(call: "connect(\(target))", errno: errno)
        }
    }

    deinit { for fd in descriptors { close(fd) } }
}
