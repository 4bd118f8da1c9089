import Braid

/// The server's reading of one perf request stream: an 8-byte big-endian response size, then
/// upload bytes (checked against `PerfPattern` from offset 0) until the client's end of stream.
/// Sans-IO, bytes in any pieces in, so the engine's `PerfServer`, the public API's
/// `PerfService` and the fuzzer (tools/fuzz.sh perf) share one parser. It holds at most the
/// 8 header bytes, whatever the client sends.
///
/// ```swift
/// var request = PerfRequest()
/// try request.append([0, 0, 0, 0, 0, 0, 0x10, 0], endOfStream: true)
/// let size = request.responseSize  // 4096
/// ```
package struct PerfRequest: Sendable, Hashable {
    /// The request header's size: the response size as a big-endian UInt64.
    package static let headerSize = 8
    private var header: [UInt8] = []
    /// The response size the client asked for, once its 8 bytes are in.
    package private(set) var requested: UInt64?
    /// Upload bytes after the header.
    package private(set) var uploaded = 0
    /// Every upload byte so far was the pattern (always true when not verifying).
    package private(set) var uploadIntact = true
    /// The client's end of stream arrived after a whole header.
    package private(set) var isComplete = false
    private let verifyUpload: Bool

    /// - Parameter verifyUpload: check the upload bytes against the pattern.
    package init(verifyUpload: Bool = true) { self.verifyUpload = verifyUpload }

    /// The bytes to send back: `requested`, clamped to `Int.max` (0 before the header is in).
    package var responseSize: Int { requested.map { Int(clamping: $0) } ?? 0 }

    /// Takes the next bytes of the stream, and its end if `endOfStream`. Throws
    /// `NetworkError.unexpectedEndOfStream` when the stream ends inside the header, and
    /// `NetworkError.invalidState` for bytes after the end.
    package mutating func append<Bytes: Collection<UInt8>>(_ bytes: Bytes, endOfStream: Bool) throws(NetworkError) {
        guard !isComplete else {
            guard bytes.isEmpty && endOfStream else { throw .invalidState("perf request bytes after the end of the stream") }
            return
        }
        var rest = bytes[...]
        if requested == nil {
            let missing = Self.headerSize - header.count
            header += rest.prefix(missing)
            rest = rest.dropFirst(missing)
            if header.count == Self.headerSize {
                requested = header.reduce(0) { $0 << 8 | UInt64($1) }
            }
        }
        if !rest.isEmpty {
            if verifyUpload && uploadIntact && !PerfPattern.matches(rest, at: uploaded) { uploadIntact = false }
            uploaded += rest.count
        }
        guard endOfStream else { return }
        guard requested != nil else {
            throw .unexpectedEndOfStream(received: header.count, wanted: Self.headerSize)
        }
        isComplete = true
    }
}
