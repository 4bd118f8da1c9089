import Foundation

/// An incremental TLV decoder: `append` bytes as they arrive, in pieces of any size, and take
/// whole messages with `next()`.
///
/// Memory grows only with bytes actually appended, never with what a header announces: a
/// header whose length exceeds `maximumMessageSize` makes `next()` throw
/// `TLVFramingError.messageTooLarge` as soon as its 8 bytes are here, before anything of that
/// size exists. Once it has thrown, the decoder is failed for good (the stream has lost its
/// message boundaries) and every later `next()` throws the same error.
///
/// ```swift
/// var decoder = TLVDecoder(maximumMessageSize: 1 << 20)
/// decoder.append([0, 0, 0, 7, 0, 0, 0, 2, 0x68])
/// decoder.append([0x69])
/// let message = try decoder.next()  // TLVMessage(type: 7, value: "hi")
/// ```
public struct TLVDecoder: Sendable {
    /// The largest value accepted, in bytes.
    public let maximumMessageSize: Int
    /// Appended bytes not yet returned are `buffer[start...]`.
    private var buffer: [UInt8] = []
    private var start = 0
    private var failure: TLVFramingError?

    /// A decoder that accepts values of at most `maximumMessageSize` bytes (0 to UInt32.max;
    /// default 16 MiB).
    public init(maximumMessageSize: Int = TLVFraming.defaultMaximumMessageSize) {
        precondition(
            (0...TLVFraming.largestEncodableSize).contains(maximumMessageSize),
            "maximumMessageSize must be between 0 and UInt32.max")
        self.maximumMessageSize = maximumMessageSize
    }

    /// Bytes appended and not yet returned in a message.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Whether no partial message is buffered (the stream is at a message boundary).
    public var isAtMessageBoundary: Bool { bufferedByteCount == 0 }

    /// How many more bytes must arrive before `next()` can return the next message (at least
    /// the rest of its header, then the rest of its value); 0 when `next()` has a message or
    /// an error to give now.
    public var bytesNeeded: Int {
        if failure != nil { return 0 }
        let available = bufferedByteCount
        guard available >= TLVFraming.headerSize else { return TLVFraming.headerSize - available }
        let length = Int(headerField(at: 4))
        if length > maximumMessageSize { return 0 }
        return max(0, TLVFraming.headerSize + length - available)
    }

    /// Adds bytes that arrived, after those appended before.
    public mutating func append<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        guard !bytes.isEmpty else { return }
        if start > 0 && start * 2 >= buffer.count {
            // Drop what was returned once it is at least half the buffer: each byte moves at
            // most once more.
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, or nil until more bytes arrive. Throws
    /// `TLVFramingError.messageTooLarge` for a header announcing more than the maximum.
    public mutating func next() throws(TLVFramingError) -> TLVMessage? {
        if let failure { throw failure }
        let available = bufferedByteCount
        guard available >= TLVFraming.headerSize else { return nil }
        let type = headerField(at: 0)
        let length = headerField(at: 4)
        guard Int(length) <= maximumMessageSize else {
            let error = TLVFramingError.messageTooLarge(type: type, size: UInt64(length), maximum: maximumMessageSize)
            failure = error
            // The rest is garbage now: let its memory go.
            buffer = []
            start = 0
            throw error
        }
        let end = start + TLVFraming.headerSize + Int(length)
        guard end <= buffer.count else { return nil }
        let value = Data(buffer[(start + TLVFraming.headerSize)..<end])
        start = end
        if start == buffer.count {
            // Keep a small buffer's memory for the next message; give a large one back.
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
            start = 0
        }
        return TLVMessage(type: type, value: value)
    }

    /// The big-endian UInt32 at `offset` from the first unread byte.
    private func headerField(at offset: Int) -> UInt32 {
        let base = start + offset
        return UInt32(buffer[base]) << 24 | UInt32(buffer[base + 1]) << 16 | UInt32(buffer[base + 2]) << 8 | UInt32(buffer[base + 3])
    }
}
