import Braid
import Foundation
import HTTPTypes

/// `braid serve --alpn h3`: static files under a root directory, and `/N` answered with N
/// bytes (as ngtcp2's example server does), so benchmarks can ask for sizes.
struct HTTP3FileServer: Sendable {
    /// The directory served (nil: only `/N`).
    let root: String?
    /// Files and generated bodies are sent in pieces of this size, as the client reads.
    static let chunkSize = 64 * 1024
    /// What `/N` answers, made once (a 64 KiB allocation and fill per request cost the
    /// server more than the request's HTTP/3 work for small N).
    static let generatedPiece = Data(repeating: 0x61, count: chunkSize)

    @Sendable func handle(_ request: HTTPRequest, _ body: HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody) {
        guard request.method == .get || request.method == .head else {
            return (HTTPResponse(status: .methodNotAllowed, headerFields: [.allow: "GET, HEAD"]), .empty)
        }
        let path = String((request.path ?? "/").prefix { $0 != "?" })
        let head = request.method == .head
        if let file = resolve(path) {
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
            let response = HTTPResponse(status: .ok, headerFields: [.contentLength: String(size)])
            return (response, head ? .empty : .stream { writer in
                guard let handle = FileHandle(forReadingAtPath: file) else { throw CocoaError(.fileReadNoPermission) }
                defer { try? handle.close() }
                while let chunk = try handle.read(upToCount: Self.chunkSize), !chunk.isEmpty {
                    try await writer.write(chunk)
                }
            })
        }
        if let count = Int(path.dropFirst()), path.dropFirst().allSatisfy(\.isNumber), count >= 0 {
            let response = HTTPResponse(status: .ok, headerFields: [.contentLength: String(count)])
            return (response, head ? .empty : .stream { writer in
                let piece = Self.generatedPiece
                var left = count
                while left > 0 {
                    let size = min(left, piece.count)
                    try await writer.write(size == piece.count ? piece : piece.prefix(size))
                    left -= size
                }
            })
        }
        return (HTTPResponse(status: .notFound), .data(Data("not found\n".utf8)))
    }

    /// The regular file under `root` that `path` names (`/` is `index.html`); nil for
    /// anything that would leave the root (`..`), or is not a readable regular file.
    func resolve(_ path: String) -> String? {
        guard let root, let decoded = path.removingPercentEncoding else { return nil }
        let parts = decoded.split(separator: "/", omittingEmptySubsequences: true)
        guard !parts.contains(where: { $0 == ".." || $0 == "." }) else { return nil }
        let relative = parts.isEmpty ? "index.html" : parts.joined(separator: "/")
        let file = (root as NSString).appendingPathComponent(relative)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue,
            FileManager.default.isReadableFile(atPath: file)
        else { return nil }
        return file
    }
}
