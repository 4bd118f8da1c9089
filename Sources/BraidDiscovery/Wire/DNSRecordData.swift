/// A record's data, parsed for the types DNS-SD uses and kept as bytes for the rest.
public enum DNSRecordData: Hashable, Sendable {
    case a([UInt8])
    case aaaa([UInt8])
    case ptr(DNSName)
    /// RFC 2782: the target host and port of a service instance.
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// RFC 6763 §6: the strings of a TXT record, each 0 to 255 bytes. An empty list goes on the
    /// wire as one empty string, as §6.1 requires.
    case txt([[UInt8]])
    /// RFC 6762 §6.1's restricted form: the owner's name and the types it has (below 256).
    case nsec(next: DNSName, types: Set<DNSRecordType>)
    case other(type: DNSRecordType, bytes: [UInt8])

    public var type: DNSRecordType {
        switch self {
        case .a: .a
        case .aaaa: .aaaa
        case .ptr: .ptr
        case .srv: .srv
        case .txt: .txt
        case .nsec: .nsec
        case .other(let type, _): type
        }
    }
}
