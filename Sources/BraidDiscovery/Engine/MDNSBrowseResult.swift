/// One service instance a browser knows of, on one interface, with what is resolved of it so far.
public struct MDNSBrowseResult: Hashable, Sendable {
    /// The instance's full name: `<instance>.<type>.<domain>`.
    public var instanceName: DNSName
    public var interface: Int32
    /// The TXT record's strings (empty until the TXT record is heard).
    public var txt: [[UInt8]]
    /// The SRV record's target and port, when heard.
    public var host: DNSName?
    public var port: UInt16?
    /// The A and AAAA records of the host, when heard.
    public var addresses: [DNSRecordData]

    /// The instance label: the human-readable name ("Table 7").
    public var instance: [UInt8] { instanceName.labels.first ?? [] }

    public init(instanceName: DNSName, interface: Int32, txt: [[UInt8]], host: DNSName?, port: UInt16?, addresses: [DNSRecordData]) {
        self.instanceName = instanceName
        self.interface = interface
        self.txt = txt
        self.host = host
        self.port = port
        self.addresses = addresses
    }
}
