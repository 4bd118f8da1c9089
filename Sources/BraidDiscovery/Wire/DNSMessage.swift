/// A DNS message as mDNS uses it (RFC 1035 §4, RFC 6762 §18): header fields, questions and the
/// three record sections. `init(parsing:)` reads any bytes without trusting them; `serialized()`
/// writes with name compression.
public struct DNSMessage: Hashable, Sendable {
    /// The largest message Braid reads or writes: RFC 6762 §17's ceiling for a multicast DNS
    /// packet. Larger input is rejected whole.
    public static let maximumSize = 9000

    /// 0 in multicast queries and responses (RFC 6762 §18.1).
    public var id: UInt16
    /// The QR bit.
    public var isResponse: Bool
    /// The AA bit; set in every mDNS response (RFC 6762 §18.4).
    public var isAuthoritative: Bool
    /// The TC bit: in a query, more known answers follow in the next packet (RFC 6762 §7.2).
    public var isTruncated: Bool
    /// Opcode and rcode; mDNS ignores messages where either is not zero (RFC 6762 §18.3, §18.11).
    public var opcode: UInt8
    public var rcode: UInt8
    public var questions: [DNSQuestion]
    public var answers: [DNSResourceRecord]
    public var authorities: [DNSResourceRecord]
    public var additionals: [DNSResourceRecord]

    public init(
        id: UInt16 = 0, isResponse: Bool, isAuthoritative: Bool = false, isTruncated: Bool = false,
        opcode: UInt8 = 0, rcode: UInt8 = 0,
        questions: [DNSQuestion] = [], answers: [DNSResourceRecord] = [],
        authorities: [DNSResourceRecord] = [], additionals: [DNSResourceRecord] = []
    ) {
        self.id = id
        self.isResponse = isResponse
        self.isAuthoritative = isAuthoritative
        self.isTruncated = isTruncated
        self.opcode = opcode
        self.rcode = rcode
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    /// Parses one message. Throws `DNSWireError` for anything that is not a whole, well-formed
    /// message of at most `maximumSize` bytes; never reads outside `bytes`, never allocates in
    /// proportion to a count the message claims, and follows compression pointers only backward.
    public init<Bytes: Collection<UInt8>>(parsing bytes: Bytes) throws(DNSWireError) {
        var reader = try DNSMessageReader(Array(bytes))
        self = try reader.readMessage()
    }

    /// The message's bytes, names compressed where RFC 6762 allows (not in SRV and NSEC data,
    /// which older parsers read uncompressed).
    public func serialized() -> [UInt8] {
        var writer = DNSMessageWriter()
        writer.write(self)
        return writer.bytes
    }

    /// All records of the three sections.
    public var records: [DNSResourceRecord] { answers + authorities + additionals }
}
