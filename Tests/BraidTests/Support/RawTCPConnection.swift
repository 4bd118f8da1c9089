import Foundation
import Glibc

@testable import Braid

/// Runs blocking socket calls on a thread of their own, so the thousands of them an attack
/// test makes do not hold one of the few threads the suite's tasks share.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A blocking TCP connection from `address` (any of 127.0.0.0/8, which Linux routes to
/// loopback, so any of them can be bound without setup; any port) to 127.0.0.1:`port`.
func rawTCPConnection(from address: String, toPort port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw NetworkError.system(call: "socket", errno: errno) }
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_addr.s_addr = inet_addr(address)
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_port = port.bigEndian
    target.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &local) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    let connected = withUnsafePointer(to: &target) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0, connected == 0 else {
        let failure = errno
        close(fd)
        throw NetworkError.system(call: bound == 0 ? "connect" : "bind", errno: failure)
    }
    return fd
}
