/// Writes the big-endian fields `ByteReader` reads back (serialized tickets).
package struct ByteWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func writeByte(_ byte: UInt8) { bytes.append(byte) }

    package mutating func writeUInt32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func writeUInt64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// A 4-byte length, then the bytes.
    package mutating func writeLengthPrefixed(_ field: [UInt8]) {
        writeUInt32(UInt32(field.count))
        bytes.append(contentsOf: field)
    }
}
