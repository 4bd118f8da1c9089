import Foundation

/// A DNS-SD TXT record as a dictionary (RFC 6763 §6): keys without case, each holding nothing
/// (a key alone: a boolean attribute), an empty value, or a value of bytes.
///
/// ```swift
/// var txt = NWTXTRecord(["players": "4"])
/// txt["mode"] = "coop"
/// let players = txt["players"]
/// ```
public struct NWTXTRecord: Hashable, Sendable, CustomDebugStringConvertible {
    /// One key's value.
    public enum Entry: Hashable, Sendable {
        /// The key is present with no "=" (a boolean attribute).
        case none
        /// "key=" with an empty value.
        case empty
        /// A value that is UTF-8 text.
        case string(String)
        /// A value that is not UTF-8 text.
        case data(Data)
    }

    /// The entries in the order they were set, keys as given (looked up without case).
    var entries: [(key: String, entry: Entry)] = []

    /// An empty record.
    public init() {}

    /// A record with `dictionary`'s keys and string values.
    public init(_ dictionary: [String: String]) {
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) { setEntry(value.isEmpty ? .empty : .string(value), for: key) }
    }

    /// A record from the wire form (length-prefixed strings); nil if a length runs past the end.
    public init?(_ txtRecord: Data) {
        var strings: [[UInt8]] = []
        var index = txtRecord.startIndex
        while index < txtRecord.endIndex {
            let length = Int(txtRecord[index])
            let start = txtRecord.index(after: index)
            guard txtRecord.distance(from: start, to: txtRecord.endIndex) >= length else { return nil }
            let end = txtRecord.index(start, offsetBy: length)
            strings.append(Array(txtRecord[start..<end]))
            index = end
        }
        self.init(strings: strings)
    }

    /// A record from the strings of a TXT record. The first occurrence of a key wins; strings
    /// that are empty or start with "=" are skipped (RFC 6763 §6.4).
    init(strings: [[UInt8]]) {
        for string in strings where !string.isEmpty && string.first != UInt8(ascii: "=") {
            let equals = string.firstIndex(of: UInt8(ascii: "="))
            let key = String(decoding: string[..<(equals ?? string.endIndex)], as: UTF8.self)
            guard getEntry(for: key) == nil else { continue }
            let entry: Entry
            if let equals {
                let value = Array(string[(equals + 1)...])
                if value.isEmpty {
                    entry = .empty
                } else if let text = String(validating: value, as: UTF8.self) {
                    entry = .string(text)
                } else {
                    entry = .data(Data(value))
                }
            } else {
                entry = .none
            }
            entries.append((key, entry))
        }
    }

    /// The strings of the TXT record, each `key`, `key=` or `key=value`, at most 255 bytes
    /// (longer ones are cut).
    var strings: [[UInt8]] {
        entries.map { key, entry in
            var bytes = Array(key.utf8)
            switch entry {
            case .none: break
            case .empty: bytes.append(UInt8(ascii: "="))
            case .string(let value): bytes += [UInt8(ascii: "=")] + Array(value.utf8)
            case .data(let value): bytes += [UInt8(ascii: "=")] + Array(value)
            }
            return Array(bytes.prefix(255))
        }
    }

    /// The wire form: each entry as a length-prefixed string.
    public var data: Data {
        Data(strings.flatMap { [UInt8($0.count)] + $0 })
    }

    /// The keys and their values as text (an entry without a value, or a value that is not
    /// text, as "").
    public var dictionary: [String: String] {
        var result: [String: String] = [:]
        for (key, entry) in entries {
            if case .string(let value) = entry { result[key] = value } else { result[key] = "" }
        }
        return result
    }

    /// How many keys the record has.
    public var count: Int { entries.count }

    /// Whether the record has no keys.
    public var isEmpty: Bool { entries.isEmpty }

    /// A key's value as text; setting nil removes the key.
    public subscript(key: String) -> String? {
        get {
            switch getEntry(for: key) {
            case .some(.string(let value)): value
            case .some(.empty), .some(.none): ""
            case .some(.data), nil: nil
            }
        }
        set {
            if let newValue { setEntry(newValue.isEmpty ? .empty : .string(newValue), for: key) } else { removeEntry(key: key) }
        }
    }

    /// A key's entry, nil if the record does not have the key.
    public func getEntry(for key: String) -> Entry? {
        entries.first { $0.key.lowercased() == key.lowercased() }?.entry
    }

    /// Sets a key's entry, replacing any it had.
    public mutating func setEntry(_ entry: Entry, for key: String) {
        if let index = entries.firstIndex(where: { $0.key.lowercased() == key.lowercased() }) {
            entries[index].entry = entry
        } else {
            entries.append((key, entry))
        }
    }

    /// Removes a key; false if the record did not have it.
    @discardableResult
    public mutating func removeEntry(key: String) -> Bool {
        guard let index = entries.firstIndex(where: { $0.key.lowercased() == key.lowercased() }) else { return false }
        entries.remove(at: index)
        return true
    }

    public static func == (lhs: NWTXTRecord, rhs: NWTXTRecord) -> Bool { lhs.strings == rhs.strings }
    public func hash(into hasher: inout Hasher) { hasher.combine(strings) }

    public var debugDescription: String {
        "NWTXTRecord(\(entries.map { "\($0.key)=\($0.entry)" }.joined(separator: ", ")))"
    }
}
