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
    /// Appended bytes not yet returned: `pieces[first...]`, the first of them from
    /// `offset` on. Pieces are kept as appended (a `Data` is not copied), so a stream's bytes
    /// are copied once, into the message that returns them.
    private var pieces: [Data] = []
    private var first = 0
    private var offset = 0
    private var buffered = 0
    private var failure: TLVFramingError?
    /// Values smaller than this are always copied out of their piece.
    private static let smallestSharedValue = 4096

    /// A decoder that accepts values of at most `maximumMessageSize` bytes (0 to UInt32.max;
    /// default 16 MiB).
    public init(maximumMessageSize: Int = TLVFraming.defaultMaximumMessageSize) {
        precondition(
            (0...TLVFraming.largestEncodableSize).contains(maximumMessageSize),
            "maximumMessageSize must be between 0 and UInt32.max")
        self.maximumMessageSize = maximumMessageSize
    }

    /// Bytes appended and not yet returned in a message.
    public var bufferedByteCount: Int { buffered }

    /// Whether no partial message is buffered (the stream is at a message boundary).
    public var isAtMessageBoundary: Bool { buffered == 0 }

    /// How many more bytes must arrive before `next()` can return the next message (at least
    /// the rest of its header, then the rest of its value); 0 when `next()` has a message or
    /// an error to give now.
    public var bytesNeeded: Int {
        if failure != nil { return 0 }
        guard buffered >= TLVFraming.headerSize else { return TLVFraming.headerSize - buffered }
        let length = Int(UInt32(truncatingIfNeeded: header()))
        if length > maximumMessageSize { return 0 }
        return max(0, TLVFraming.headerSize + length - buffered)
    }

    /// Adds bytes that arrived, after those appended before. The decoder keeps `bytes` itself
    /// (no copy) until its messages are returned.
    public mutating func append(_ bytes: Data) {
        guard !bytes.isEmpty, failure == nil else { return }
        if first > 0 && first * 2 >= pieces.count {
            // Drop the returned pieces' slots once they are half the array.
            pieces.removeSubrange(0..<first)
            first = 0
        }
        pieces.append(bytes)
        buffered += bytes.count
    }

    /// Adds bytes that arrived, after those appended before (copied).
    public mutating func append<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        append(Data(bytes))
    }

    /// The next whole message, or nil until more bytes arrive. Throws
    /// `TLVFramingError.messageTooLarge` for a header announcing more than the maximum.
    ///
    /// A value that is a whole appended piece is that piece, not a copy; a value of 4 KiB or
    /// more lying within one appended piece and at least half its size shares that piece's
    /// memory; any other value is copied. So a message an application
    /// keeps holds at most twice its own size, however large the piece it arrived in.
    ///
    /// `sharingStorage: true` is for a value used at once and dropped, as `Coder` decodes
    /// one: a value lying within one appended piece is then a slice of it, however small (no
    /// allocation, no copy; its indices start where it lies in the piece, not at 0), and
    /// keeps the whole piece alive while it lives.
    public mutating func next(sharingStorage: Bool = false) throws(TLVFramingError) -> TLVMessage? {
        if let failure { throw failure }
        guard buffered >= TLVFraming.headerSize else { return nil }
        let fields = header()
        let type = UInt32(truncatingIfNeeded: fields >> 32), length = UInt32(truncatingIfNeeded: fields)
        guard Int(length) <= maximumMessageSize else {
            let error = TLVFramingError.messageTooLarge(type: type, size: UInt64(length), maximum: maximumMessageSize)
            failure = error
            // The rest is garbage now: let its memory go.
            pieces = []
            first = 0
            offset = 0
            buffered = 0
            throw error
        }
        let count = Int(length)
        guard buffered >= TLVFraming.headerSize + count else { return nil }
        skip(TLVFraming.headerSize)
        return TLVMessage(type: type, value: take(count, sharingStorage: sharingStorage))
    }

    /// The header at the first unread byte, type in the high half: 8 bytes, gathered across
    /// pieces if they are split (the caller checked that 8 are buffered).
    private func header() -> UInt64 {
        let from = offset
        if pieces[first].count - from >= TLVFraming.headerSize {
            return pieces[first].withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: from, as: UInt64.self)) }
        }
        var fields: UInt64 = 0, needed = TLVFraming.headerSize
        var index = first, start = from
        while needed > 0 {
            let piece = pieces[index]
            let run = min(needed, piece.count - start)
            for position in 0..<run { fields = fields << 8 | UInt64(piece[piece.startIndex + start + position]) }
            needed -= run
            index += 1
            start = 0
        }
        return fields
    }

    /// Moves past `count` buffered bytes.
    private mutating func skip(_ count: Int) {
        var remaining = count
        while remaining > 0 {
            let run = min(remaining, pieces[first].count - offset)
            advance(run)
            remaining -= run
        }
    }

    /// Consumes `run` bytes of the first piece, dropping it once it is all read.
    private mutating func advance(_ run: Int) {
        offset += run
        buffered -= run
        if offset == pieces[first].count {
            pieces[first] = Data()
            first += 1
            offset = 0
            if first == pieces.count {
                pieces.removeAll(keepingCapacity: true)
                first = 0
            }
        }
    }

    /// The next `count` buffered bytes as a value (the caller checked they are here).
    private mutating func take(_ count: Int, sharingStorage: Bool) -> Data {
        guard count > 0 else { return Data() }
        let piece = pieces[first], from = offset
        if piece.count - from >= count {
            let value: Data
            if from == 0 && count == piece.count && piece.startIndex == 0 {
                // The piece is the value (fed exactly its bytes): handed on as it is.
                value = piece
            } else if sharingStorage {
                let start = piece.startIndex + from
                value = piece[start..<(start + count)]
            } else if count >= Self.smallestSharedValue && count * 2 >= piece.count {
                // Small values are copied (below): a few bytes' `Data` may keep them inline,
                // with no memory of its own to share.
                // A view of the piece that keeps it alive, indexed from 0 as any value is.
                let holder = PieceHolder(piece)
                value = holder.piece.withUnsafeBytes { bytes in
                    Data(
                        bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes.baseAddress! + from), count: count,
                        deallocator: .custom { _, _ in withExtendedLifetime(holder) {} })
                }
            } else {
                value = piece.withUnsafeBytes { Data(bytes: $0.baseAddress! + from, count: count) }
            }
            advance(count)
            return value
        }
        var value = Data(capacity: count)
        var remaining = count
        while remaining > 0 {
            let piece = pieces[first], from = offset
            let run = min(remaining, piece.count - from)
            piece.withUnsafeBytes { value.append($0.baseAddress!.assumingMemoryBound(to: UInt8.self) + from, count: run) }
            remaining -= run
            advance(run)
        }
        return value
    }
}

/// Keeps a piece's bytes alive for the values that share them. A `Data` whose storage is not
/// referenced elsewhere may move its bytes when mutated; this one is never mutated again.
private final class PieceHolder: Sendable {
    let piece: Data
    init(_ piece: Data) { self.piece = piece }
}
