import BraidIO

extension TCP {
    /// Throws `NetworkError.invalidConfiguration` for options that cannot work.
    func validate() throws {
        if ip.hopLimit == 0 { throw NetworkError.invalidConfiguration("an IP hop limit of 0 sends nothing; use 1...255") }
        if receiveBufferLimit < 1 || sendBufferLimit < 1 {
            throw NetworkError.invalidConfiguration("TCP receive and send buffer limits must be at least 1 byte")
        }
        if serverLoops < 1 { throw NetworkError.invalidConfiguration("a listener needs at least 1 server loop") }
        if newConnectionLimitPerAddress < 0 {
            throw NetworkError.invalidConfiguration("newConnectionLimitPerAddress must be 0 (no limit) or more")
        }
        if let keepalive, keepalive.idleTimeInSeconds == 0 || keepalive.count == 0 || keepalive.intervalInSeconds == 0 {
            throw NetworkError.invalidConfiguration("TCP keepalive idle time, count and interval must each be at least 1")
        }
    }
}

extension TCPOptions {
    /// The datapath's socket options for a TCP stack (alone or under TLS), with the
    /// parameters' service class and multipath choice.
    init(_ tcp: TCP, serviceClass: NWParameters.ServiceClass, multipath: NWParameters.MultipathServiceType) {
        self.init(
            noDelay: tcp.noDelay,
            keepAlive: tcp.keepalive.map {
                KeepAlive(
                    enabled: true, idle: .seconds(Int64($0.idleTimeInSeconds)), interval: .seconds(Int64($0.intervalInSeconds)),
                    count: Int($0.count))
            } ?? KeepAlive(),
            connectionTimeout: tcp.connectionTimeout.map { .seconds(Int64($0)) },
            fastOpen: tcp.fastOpenAllowed,
            multipath: multipath != .disabled,
            // Best effort is the kernel's default mark: no call needed.
            dscp: serviceClass == .bestEffort ? nil : serviceClass.dscp,
            hopLimit: tcp.ip.hopLimit,
            dontFragment: tcp.ip.fragmentationAllowed.map { !$0 })
    }
}
