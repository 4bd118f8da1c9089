import Foundation
import Glibc

@testable import Braid
import BraidIO

/// A datagram server on a Unix-domain socket file that sends every datagram back to its
/// sender, on a thread of its own, with plain blocking system calls: the independent peer for
/// `UDP()` over `.unix(path:)`.
final class UnixDatagramEchoPeer: Sendable {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard try UnixSocketPath(path).withSockAddr({ bind(fd, $0, $1) }) == 0 else {
            let error = errno
            close(fd)
            throw NetworkError.system(call: "bind(\(path))", errno: error)
        }
        self.path = path
        self.fd = fd
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                var sender = sockaddr_un()
                var length = socklen_t(MemoryLayout<sockaddr_un>.size)
                let count = buffer.withUnsafeMutableBytes { bytes in
                    withUnsafeMutablePointer(to: &sender) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, bytes.baseAddress, bytes.count, 0, $0, &length) }
                    }
                }
                // `stop()` shuts the socket down: the read returns nothing.
                guard count > 0 else { return }
                _ = buffer.withUnsafeBytes { bytes in
                    withUnsafePointer(to: &sender) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes.baseAddress, count, 0, $0, length) }
                    }
                }
            }
        }
        thread.start()
    }

    /// Ends the thread and removes the socket file.
    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        unlink(path)
    }

    deinit { close(fd) }
}
