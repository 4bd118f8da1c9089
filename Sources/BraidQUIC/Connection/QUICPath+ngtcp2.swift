import CBraid

extension QUICPath {
    init(_ path: ngtcp2_path) {
        self.init(
            local: QUICAddress(path.local.addr, length: Int(path.local.addrlen)) ?? QUICAddress.unspecified,
            remote: QUICAddress(path.remote.addr, length: Int(path.remote.addrlen)) ?? QUICAddress.unspecified)
    }

    /// Calls `body` with an `ngtcp2_path` pointing at copies of both addresses.
    func withNgtcp2Path<R>(_ body: (UnsafePointer<ngtcp2_path>) -> R) -> R {
        local.withSockAddr { localAddr, localLength in
            remote.withSockAddr { remoteAddr, remoteLength in
                var path = ngtcp2_path(
                    local: ngtcp2_addr(addr: UnsafeMutablePointer(mutating: localAddr), addrlen: ngtcp2_socklen(localLength)),
                    remote: ngtcp2_addr(addr: UnsafeMutablePointer(mutating: remoteAddr), addrlen: ngtcp2_socklen(remoteLength)),
                    user_data: nil)
                return body(&path)
            }
        }
    }
}
