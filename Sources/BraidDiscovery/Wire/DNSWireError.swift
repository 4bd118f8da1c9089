/// Why bytes are not a DNS message Braid accepts, or a value cannot be written as one.
public enum DNSWireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The message ends inside a header, question, record or name.
    case truncated(String)
    /// A name breaks the rules: a compression pointer that does not point strictly backward (so
    /// loops cannot happen), too many pointers, a reserved label type, a label or name too long.
    case invalidName(String)
    /// A record's data does not match its type (an A record that is not 4 bytes, a TXT string
    /// running past its record), or the message is larger than Braid reads.
    case malformed(String)

    public var description: String {
        switch self {
        case .truncated(let what): "DNS message truncated: \(what)"
        case .invalidName(let what): "invalid DNS name: \(what)"
        case .malformed(let what): "malformed DNS message: \(what)"
        }
    }
}
