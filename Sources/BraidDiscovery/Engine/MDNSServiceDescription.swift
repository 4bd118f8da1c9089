/// What a responder advertises: one service instance and the host it runs on.
public struct MDNSServiceDescription: Hashable, Sendable {
    /// The instance label ("Table 7"), UTF-8, at most 63 bytes.
    public var instance: [UInt8]
    /// `_type._proto.domain`, e.g. `_game._tcp.local`.
    public var serviceType: DNSName
    public var port: UInt16
    public var txt: [[UInt8]]
    /// The host label the SRV record points at, under `local` (`<hostLabel>.local`).
    public var hostLabel: [UInt8]
    /// The host's A and AAAA records' data.
    public var addresses: [DNSRecordData]

    public init(instance: [UInt8], serviceType: DNSName, port: UInt16, txt: [[UInt8]], hostLabel: [UInt8], addresses: [DNSRecordData]) {
        self.instance = instance
        self.serviceType = serviceType
        self.port = port
        self.txt = txt
        self.hostLabel = hostLabel
        self.addresses = addresses
    }
}
