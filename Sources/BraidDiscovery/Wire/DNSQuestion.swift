/// One question: a name, a type, and (mDNS, RFC 6762 §5.4) whether a unicast response is wanted,
/// which is the top bit of the class field on the wire.
public struct DNSQuestion: Hashable, Sendable {
    public var name: DNSName
    public var type: DNSRecordType
    /// The class without its top bit; 1 (IN) for everything mDNS asks.
    public var recordClass: UInt16
    public var unicastResponse: Bool

    public init(name: DNSName, type: DNSRecordType, recordClass: UInt16 = 1, unicastResponse: Bool = false) {
        self.name = name
        self.type = type
        self.recordClass = recordClass
        self.unicastResponse = unicastResponse
    }

    /// Whether `record` answers this question (same name and class; same type unless ANY).
    public func isAnswered(by record: DNSResourceRecord) -> Bool {
        record.name == name && record.recordClass == recordClass
            && (type == .any || record.data.type == type)
    }
}
