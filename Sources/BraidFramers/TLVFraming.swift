import Foundation

/// The TLV wire format Braid's `TLV` framer speaks over a byte stream: each message is an
/// 8-byte header, the message type (UInt32) then the value's length in bytes (UInt32), both
/// big-endian, followed by the value itself.
///
/// ```text
/// +----------------+----------------+---------------------+
/// | type (4 bytes) | length (4 B)   | value (length bytes)|
/// +----------------+----------------+---------------------+
/// ```
///
/// Sans-IO: pure values and functions, no sockets, clocks or threads. `TLVEncoder` makes the
/// bytes of a message and `TLVDecoder` takes bytes in any pieces and yields whole messages.
public enum TLVFraming {
    /// Bytes before each value: type then length.
    public static let headerSize = 8
    /// The largest value a decoder accepts unless told otherwise: 16 MiB.
    public static let defaultMaximumMessageSize = 16 << 20
    /// The largest value the header can announce.
    public static let largestEncodableSize = Int(UInt32.max)
}

/// One whole TLV message: its type and its value.
public struct TLVMessage: Sendable, Hashable {
    /// The type from the header (the application's meaning, e.g. an enum's raw value).
    public var type: UInt32
    /// The value: exactly the length the header announced.
    public var value: Data

    public init(type: UInt32, value: Data) {
        self.type = type
        self.value = value
    }
}

/// Why TLV framing failed.
public enum TLVFramingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A header announced a value of `size` bytes, more than the `maximum` this side accepts
    /// (for a decoder), or more than a UInt32 length can say (for an encoder). Nothing of
    /// that size was allocated.
    case messageTooLarge(type: UInt32, size: UInt64, maximum: Int)

    public var description: String {
        switch self {
        case .messageTooLarge(let type, let size, let maximum):
            "A TLV message of type \(type) announces \(size) bytes, more than the maximum of \(maximum)."
        }
    }
}

/// Makes the bytes of TLV messages.
public enum TLVEncoder {
    /// The 8-byte header of a message of `type` whose value is `length` bytes.
    public static func header(type: UInt32, length: UInt32) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: TLVFraming.headerSize)
        header.withUnsafeMutableBytes { writeHeader(type: type, length: length, into: $0) }
        return header
    }

    /// Writes the header into the first 8 bytes of `buffer`.
    public static func writeHeader(type: UInt32, length: UInt32, into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= TLVFraming.headerSize, "a TLV header needs 8 bytes")
        buffer.storeBytes(of: type.bigEndian, toByteOffset: 0, as: UInt32.self)
        buffer.storeBytes(of: length.bigEndian, toByteOffset: 4, as: UInt32.self)
    }

    /// A whole message into `buffer`, which has room for exactly the header and `value`:
    /// what a send of one message queues. `length` is `value.count` as the header says it.
    // Inlinable: specialized in the caller for its `Data` or array (a generic call per
    // message cost more than the copy).
    @inlinable
    public static func write(_ value: some Collection<UInt8>, type: UInt32, length: UInt32, into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count == TLVFraming.headerSize + Int(length) && value.count == Int(length), "a TLV message's buffer holds its header and value")
        writeHeader(type: type, length: length, into: buffer)
        let destination = UnsafeMutableRawBufferPointer(rebasing: buffer[TLVFraming.headerSize...])
        // `Data` and arrays copy in one `memcpy` (`DataProtocol.copyBytes` took the generic
        // path per call).
        let copied: Void? = value.withContiguousStorageIfAvailable { destination.copyMemory(from: UnsafeRawBufferPointer($0)) }
        if copied == nil {
            for (index, byte) in value.enumerated() { destination[index] = byte }
        }
    }

    /// The length field for a value of `count` bytes; throws if a UInt32 cannot say it.
    public static func length(type: UInt32, count: Int) throws(TLVFramingError) -> UInt32 {
        guard let length = UInt32(exactly: count) else {
            throw .messageTooLarge(type: type, size: UInt64(count), maximum: TLVFraming.largestEncodableSize)
        }
        return length
    }

    /// A whole message: header then value.
    public static func encode<Value: Collection>(type: UInt32, value: Value) throws(TLVFramingError) -> [UInt8]
    where Value.Element == UInt8 {
        var bytes = header(type: type, length: try length(type: type, count: value.count))
        bytes.append(contentsOf: value)
        return bytes
    }
}
