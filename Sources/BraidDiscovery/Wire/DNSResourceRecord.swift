/// One resource record. `cacheFlush` is mDNS's top bit of the class field (RFC 6762 §10.2): the
/// record replaces what caches hold for its name and type rather than adding to it.
public struct DNSResourceRecord: Hashable, Sendable {
    public var name: DNSName
    /// The class without its top bit; 1 (IN).
    public var recordClass: UInt16
    public var cacheFlush: Bool
    /// Seconds; 0 is a goodbye (RFC 6762 §10.1).
    public var ttl: UInt32
    public var data: DNSRecordData

    public init(name: DNSName, recordClass: UInt16 = 1, cacheFlush: Bool = false, ttl: UInt32, data: DNSRecordData) {
        self.name = name
        self.recordClass = recordClass
        self.cacheFlush = cacheFlush
        self.ttl = ttl
        self.data = data
    }

    /// Whether two records are the same record apart from TTL and the cache-flush bit: same
    /// name, class, type and data (names in the data compared without case).
    public func isSameRecord(as other: DNSResourceRecord) -> Bool {
        name == other.name && recordClass == other.recordClass && data == other.data
    }
}
