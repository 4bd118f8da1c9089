import BraidIO

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
