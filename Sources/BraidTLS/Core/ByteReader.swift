/// Reads big-endian fields from untrusted bytes (serialized tickets), nil past the end.
package struct ByteReader {
    private let bytes: [UInt8]
    private var index = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var isAtEnd: Bool { index == bytes.count }

    package mutating func readByte() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    package mutating func readBytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, bytes.count - index >= count else { return nil }
        defer { index += count }
        return Array(bytes[index..<index + count])
    }

    package mutating func readUInt32() -> UInt32? {
        readBytes(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }

    package mutating func readUInt64() -> UInt64? {
        readBytes(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } }
    }

    package mutating func readLengthPrefixed() -> [UInt8]? {
        guard let length = readUInt32() else { return nil }
        return readBytes(Int(length))
    }
}
