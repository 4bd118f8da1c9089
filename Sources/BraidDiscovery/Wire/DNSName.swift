/// A domain name as a list of labels, each of raw bytes (DNS-SD instance names are UTF-8 and may
/// hold dots and spaces, so a label is never split on "."). Compared and hashed as DNS compares
/// names: ASCII letters without regard to case, every other byte exactly.
public struct DNSName: Hashable, Sendable, CustomStringConvertible {
    /// The longest label: its length byte has six bits (RFC 1035 §2.3.4).
    public static let maximumLabelLength = 63
    /// The longest name on the wire, length bytes and the root's zero included (RFC 1035 §2.3.4).
    public static let maximumWireLength = 255

    public private(set) var labels: [[UInt8]]

    /// A name from labels; throws `DNSWireError.invalidName` for an empty label or one above 63
    /// bytes, or a name above 255 bytes on the wire.
    public init(labels: [[UInt8]]) throws(DNSWireError) {
        var length = 1
        for label in labels {
            guard !label.isEmpty, label.count <= Self.maximumLabelLength else {
                throw .invalidName("a label must have 1 to \(Self.maximumLabelLength) bytes, not \(label.count)")
            }
            length += 1 + label.count
        }
        guard length <= Self.maximumWireLength else {
            throw .invalidName("a name must fit in \(Self.maximumWireLength) bytes on the wire, not \(length)")
        }
        self.labels = labels
    }

    /// A name from its dotted form ("_game._tcp.local"); a trailing dot is allowed.
    public init(_ dotted: String) throws(DNSWireError) {
        let parts = dotted.split(separator: ".", omittingEmptySubsequences: false)
        var labels = parts.map { [UInt8]($0.utf8) }
        if labels.last == [] { labels.removeLast() }
        if labels == [[]] { labels = [] }
        try self.init(labels: labels)
    }

    /// The name `label.rest`: a service instance under its type, a type under its domain.
    public init(prefix label: [UInt8], _ rest: DNSName) throws(DNSWireError) {
        try self.init(labels: [label] + rest.labels)
    }

    public static let root = DNSName(uncheckedLabels: [])

    init(uncheckedLabels: [[UInt8]]) { labels = uncheckedLabels }

    /// The bytes the name takes on the wire without compression.
    public var wireLength: Int { labels.reduce(1) { $0 + 1 + $1.count } }

    /// The name without its first label (the parent domain); the root's parent is the root.
    public var parent: DNSName { DNSName(uncheckedLabels: Array(labels.dropFirst())) }

    /// The labels as text, dots between them (bytes that are not UTF-8 are replaced).
    public var description: String {
        labels.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
    }

    /// Whether the name ends with `suffix` (compared as DNS compares names).
    public func hasSuffix(_ suffix: DNSName) -> Bool {
        guard suffix.labels.count <= labels.count else { return false }
        return DNSName(uncheckedLabels: Array(labels.suffix(suffix.labels.count))) == suffix
    }

    public static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        guard lhs.labels.count == rhs.labels.count else { return false }
        for (a, b) in zip(lhs.labels, rhs.labels) where !Self.labelsEqual(a, b) { return false }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(labels.count)
        for label in labels {
            hasher.combine(label.count)
            for byte in label { hasher.combine(Self.folded(byte)) }
        }
    }

    static func labelsEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where folded(x) != folded(y) { return false }
        return true
    }

    static func folded(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}

extension DNSName {
    /// Whether two labels are equal as DNS compares them (ASCII letters without case).
    public static func labelsMatch(_ a: [UInt8], _ b: [UInt8]) -> Bool { labelsEqual(a, b) }
}
