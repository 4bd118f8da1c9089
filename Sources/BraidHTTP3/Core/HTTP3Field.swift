/// One header or trailer field as it goes on the wire: a lowercase name (pseudo-headers such
/// as `:method` and `:status` first) and a value.
///
/// The engine does not validate the fields it sends (nghttp3's QPACK encoder lowercases
/// names, nothing more): the public layer builds them from swift-http-types values, which are
/// valid by construction. Received fields have passed nghttp3's checks (RFC 9114 section
/// 4.1.2); a malformed one ends its stream instead.
/// Values are bytes, since HTTP allows obs-text that is not UTF-8.
///
/// ```swift
/// let fields = [HTTP3Field(":method", "GET"), HTTP3Field(":path", "/")]
/// ```
public struct HTTP3Field: Sendable, Hashable, CustomStringConvertible {
    /// The field name, lowercase (`:status`, `content-type`).
    public var name: String
    /// The field value's bytes.
    public var value: [UInt8]

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = Array(value.utf8)
    }

    public init(name: String, value: [UInt8]) {
        self.name = name
        self.value = value
    }

    /// The value as text (bytes that are not UTF-8 become U+FFFD).
    public var stringValue: String { String(decoding: value, as: UTF8.self) }

    /// The size RFC 9114 section 4.2.2 counts against SETTINGS_MAX_FIELD_SECTION_SIZE: name
    /// and value lengths plus 32.
    public var sectionSize: Int { name.utf8.count + value.count + 32 }

    public var description: String { "\(name): \(stringValue)" }
}

extension Array where Element == HTTP3Field {
    /// The value of the first field named `name`, as text.
    public func value(of name: String) -> String? {
        first { $0.name == name }?.stringValue
    }
}
