import BraidCore
import BraidHTTP3

/// The application above one HTTP/3 engine in the tests, whatever carries its streams: it
/// collects each stream's message and, as a server, answers each complete request.
final class HTTP3TestApp {
    /// What arrived on one stream.
    struct Message {
        var headers: [[HTTP3Field]] = []
        var body: [UInt8] = []
        var trailers: [HTTP3Field]?
        var ended = false
        var reset: HTTP3ErrorCode?
        var stopSending: HTTP3ErrorCode?
        var streamError: HTTP3ErrorCode?
        var rejected = false

        /// The last header section (the final response on a client).
        var fields: [HTTP3Field] { headers.last ?? [] }
    }

    /// What a server answers.
    struct Response {
        var fields: [HTTP3Field]
        var body: [UInt8] = []
        var chunkSize = 16 * 1024
        var trailers: [HTTP3Field] = []
    }

    var messages: [Int64: Message] = [:]
    var goaways: [Int64] = []
    var connectionErrors: [HTTP3Error] = []
    /// Body bytes received, whose credit a QUIC harness returns.
    var bodyBytes = 0
    /// Server: the answer to a complete request (nil: no answer yet).
    var respond: ((Int64, Message) -> Response?)?
    /// Server: answer as soon as the request's headers arrive rather than at its end.
    var respondAtHeaders = false

    func handle(_ event: HTTP3Event, engine: HTTP3Connection) {
        switch event {
        case .headers(let id, let fields):
            messages[id, default: Message()].headers.append(fields)
            if respondAtHeaders { answer(id, engine: engine) }
        case .body(let id, let bytes):
            messages[id, default: Message()].body.append(contentsOf: bytes)
            bodyBytes += bytes.count
        case .trailers(let id, let fields):
            messages[id, default: Message()].trailers = fields
        case .endOfMessage(let id):
            messages[id, default: Message()].ended = true
            if !respondAtHeaders { answer(id, engine: engine) }
        case .streamReset(let id, let code):
            messages[id, default: Message()].reset = code
        case .stopSending(let id, let code):
            messages[id, default: Message()].stopSending = code
        case .streamError(let id, let code):
            messages[id, default: Message()].streamError = code
        case .requestRejected(let id):
            messages[id, default: Message()].rejected = true
        case .goaway(let id):
            goaways.append(id)
        case .connectionError(let error):
            connectionErrors.append(error)
        }
    }

    private func answer(_ id: Int64, engine: HTTP3Connection) {
        guard engine.role == .server, engine.failure == nil, let respond, let message = messages[id], let response = respond(id, message) else { return }
        let hasBody = !response.body.isEmpty || !response.trailers.isEmpty
        let body = hasBody ? Self.source(response.body, chunkSize: response.chunkSize, trailers: response.trailers) : nil
        do {
            try engine.sendResponse(streamID: id, fields: response.fields, body: body)
        } catch {
            Issue.record("sendResponse on \(id): \(error)")
        }
    }

    /// A body source over `bytes`, copied once into a `StreamBytes` and handed out in ranges
    /// of `chunkSize`, then its trailers.
    static func source(_ bytes: [UInt8], chunkSize: Int, trailers: [HTTP3Field] = []) -> HTTP3BodySource {
        let stored = StreamBytes(copying: bytes)
        var offset = 0
        return {
            guard offset < stored.count else { return .end(trailers: trailers) }
            let end = min(offset + chunkSize, stored.count)
            defer { offset = end }
            return .bytes(stored, offset..<end)
        }
    }
}

import Testing
