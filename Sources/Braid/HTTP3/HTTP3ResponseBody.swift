import BraidHTTP3IO
import BraidIO
import Foundation

/// The body of a response an HTTP/3 server handler returns: none, bytes at hand, or bytes
/// written as they are made, at the pace the client reads them.
///
/// ```swift
/// let body = HTTP3ResponseBody.stream { writer in
///     for _ in 0..<10 { try await writer.write(Data(repeating: 0x61, count: 1024)) }
/// }
/// ```
public struct HTTP3ResponseBody: Sendable {
    enum Kind: Sendable {
        case empty
        case data(Data)
        case stream(@Sendable (HTTP3BodyWriter) async throws -> Void)
    }
    let kind: Kind

    /// No body.
    public static var empty: HTTP3ResponseBody { HTTP3ResponseBody(kind: .empty) }

    /// These bytes.
    public static func data(_ data: Data) -> HTTP3ResponseBody { HTTP3ResponseBody(kind: data.isEmpty ? .empty : .data(data)) }

    /// Bytes `write` writes; the body ends when it returns. If it throws, the stream is
    /// cancelled (H3_REQUEST_CANCELLED), so the client sees an incomplete response fail.
    public static func stream(_ write: @escaping @Sendable (HTTP3BodyWriter) async throws -> Void) -> HTTP3ResponseBody {
        HTTP3ResponseBody(kind: .stream(write))
    }

    var isEmpty: Bool {
        if case .empty = kind { true } else { false }
    }

    func write(to writer: HTTP3BodyWriter) async throws {
        switch kind {
        case .empty:
            break
        case .data(let data):
            var offset = data.startIndex
            while offset < data.endIndex {
                let end = min(offset + 64 * 1024, data.endIndex)
                try await writer.write(data[offset..<end])
                offset = end
            }
        case .stream(let write):
            try await write(writer)
        }
    }
}

/// Writes a streamed response body: each `write` waits while 256 KiB of the body wait for
/// the stream.
public struct HTTP3BodyWriter: Sendable {
    let outbox: HTTP3BodyOutbox

    /// Sends `data` (copied once), waiting for room; throws `NetworkError` if the client
    /// stopped the stream or the connection ended.
    public func write(_ data: Data) async throws {
        try await NetworkError.mapping { try await outbox.send(data) }
    }
}
