// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh http3-server
// with swiftc, together with tools/fuzz/HTTP3ServerFuzzMain.swift, against the modules of a
// sanitizer-instrumented SwiftPM build.
import BraidHTTP3
import HTTPTypes

@testable import Braid

/// One fuzz input through what an HTTP/3 server runs on a client's bytes on top of nghttp3:
/// `HTTP3Connection`'s callbacks (the field sections it gathers and bounds, resets, stops,
/// stream closes, responses and their writes) and `HTTP3FieldMapping`, which turns a request's
/// fields into the `HTTPRequest` a handler gets. What must hold for any bytes:
/// - no trap and no sanitizer report;
/// - every header section handed on stays within `maxFieldSectionSize` (larger ones end their
///   stream with H3_EXCESSIVE_LOAD instead);
/// - a request maps to the same `HTTPRequest` after a round trip through the wire fields;
/// - once the connection has failed it reports nothing more.
///
/// Input: byte 0 picks the configuration (bit 0: a 1 KiB field-section limit, else the default
/// 64 KiB; bit 1: no QPACK dynamic table), then records of one control byte (bits 0-2: the
/// client stream, from `streams`; bit 3: FIN; bits 4-5: data, the client's RESET_STREAM, its
/// STOP_SENDING, or the QUIC stream's close; bit 6: answer requests on that stream), a
/// big-endian UInt16 length (cut to what is left) and the bytes.
enum HTTP3ServerFuzzInput {
    /// Client streams: bidirectional (requests) 0, 4, 8, 12, and unidirectional 2, 6, 10, 14.
    static let streams: [Int64] = [0, 4, 8, 12, 2, 6, 10, 14]

    struct Outcome {
        var headers = 0
        var requests: [HTTPRequest] = []
        var streamResets = 0
        var excessiveLoadResets = 0
        var closeCode: BraidHTTP3.HTTP3ErrorCode?
        var writes = 0
    }

    static func configuration(variant: UInt8) -> HTTP3Configuration {
        var configuration = HTTP3Configuration()
        if variant & 1 != 0 { configuration.maxFieldSectionSize = 1024 }
        if variant & 2 != 0 { configuration.qpackMaxTableCapacity = 0 }
        return configuration
    }

    @discardableResult
    static func run(_ input: [UInt8]) -> Outcome {
        var outcome = Outcome()
        guard let variant = input.first else { return outcome }
        let configuration = configuration(variant: variant)
        guard let engine = try? HTTP3Connection(
            role: .server, localStreams: HTTP3LocalStreams(control: 3, qpackEncoder: 7, qpackDecoder: 11), configuration: configuration)
        else { preconditionFailure("a server engine could not start") }
        var index = 1
        while index + 3 <= input.count {
            let control = input[index]
            let length = min(Int(input[index + 1]) << 8 | Int(input[index + 2]), input.count - index - 3)
            let bytes = Array(input[(index + 3)..<(index + 3 + length)])
            index += 3 + length
            let stream = streams[Int(control & 7)]
            let failedBefore = engine.failure != nil
            switch control >> 4 & 3 {
            case 0: engine.receive(streamID: stream, bytes: bytes, fin: control & 8 != 0)
            case 1: engine.peerResetStream(streamID: stream, code: 0x10c)
            case 2: engine.peerStoppedSending(streamID: stream, code: 0x10c)
            default: engine.streamClosed(streamID: stream)
            }
            let events = engine.takeEvents()
            precondition(!failedBefore || events.isEmpty, "a failed connection reported \(events)")
            for event in events {
                switch event {
                case .headers(let id, let fields):
                    outcome.headers += 1
                    let size = fields.reduce(0) { $0 + $1.sectionSize }
                    precondition(size <= configuration.maxFieldSectionSize, "a \(size)-byte field section went past the limit")
                    if let request = HTTP3FieldMapping.request(fields) {
                        let again = HTTP3FieldMapping.request(HTTP3FieldMapping.fields(request))
                        precondition(again.map { HTTP3FieldMapping.request(HTTP3FieldMapping.fields($0)) == $0 } ?? false,
                            "a request changed in a round trip: \(request)")
                        outcome.requests.append(request)
                    }
                    if control & 0x40 != 0 {
                        try? engine.sendResponse(streamID: id, fields: HTTP3FieldMapping.fields(HTTPResponse(status: .ok)))
                    }
                case .streamReset:
                    outcome.streamResets += 1
                default:
                    break
                }
            }
            for action in engine.takeTransportActions() {
                switch action {
                case .resetStream(_, let code) where code == .excessiveLoad: outcome.excessiveLoadResets += 1
                case .closeConnection(let code, _): outcome.closeCode = code
                default: break
                }
            }
            var writes = 0
            while writes < 64, engine.nextWrite(maxBytes: 16 * 1024) != nil { writes += 1 }
            outcome.writes += writes
        }
        return outcome
    }

    // MARK: Seeds

    /// An RFC 7541 integer with an N-bit prefix; `first` holds the bits above the prefix.
    static func integer(_ value: Int, prefix: Int, first: UInt8) -> [UInt8] {
        let limit = (1 << prefix) - 1
        if value < limit { return [first | UInt8(value)] }
        var out = [first | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            out.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        out.append(UInt8(rest))
        return out
    }

    /// A field section of literal fields with literal names (RFC 9204 section 4.5.6).
    static func section(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = [0, 0]
        for (name, value) in fields {
            out += integer(name.utf8.count, prefix: 3, first: 0x20) + Array(name.utf8)
            out += integer(value.utf8.count, prefix: 7, first: 0) + Array(value.utf8)
        }
        return out
    }

    /// A frame: type, length (both varints; lengths up to 16,383) and payload.
    static func frame(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count < 64 ? [UInt8(payload.count)] : [UInt8(0x40 | payload.count >> 8), UInt8(payload.count & 0xFF)]
        return [type] + length + payload
    }

    static func record(stream: Int, fin: Bool = false, action: UInt8 = 0, respond: Bool = false, _ bytes: [UInt8] = []) -> [UInt8] {
        let control = UInt8(stream) | (fin ? 8 : 0) | action << 4 | (respond ? 0x40 : 0)
        return [control, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }

    static let get = [(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", "/index.html"), ("accept", "*/*")]
    /// The client's control stream: its type and an empty SETTINGS frame.
    static let controlStream = record(stream: 4, [0x00] + frame(0x04, []))

    static func seeds() -> [(String, [UInt8])] {
        let headers = frame(0x01, section(get))
        return [
            ("get-request", [0] + controlStream + record(stream: 0, fin: true, respond: true, headers)),
            // The "rapid reset" attack: requests reset as soon as their header sections are in.
            ("rapid-reset", [0] + controlStream + (0..<4).flatMap { stream in
                record(stream: stream, headers) + record(stream: stream, action: 1) + record(stream: stream, action: 2) + record(stream: stream, action: 3)
            }),
            ("oversized-field-section", [1] + controlStream
                + record(stream: 0, fin: true, frame(0x01, section(get + (0..<20).map { ("x-fill-\($0)", String(repeating: "v", count: 100)) })))
                + record(stream: 1, fin: true, respond: true, headers)),
            ("qpack-garbage", [0] + controlStream + record(stream: 0, fin: true, frame(0x01, [0x00, 0x00, 0xbf, 0xff, 0xff, 0xff, 0x0f]))),
            ("uppercase-field", [2] + controlStream + record(stream: 0, fin: true, frame(0x01, section(get + [("X-Upper", "1")])))),
            ("post-with-body", [0] + controlStream
                + record(stream: 0, respond: true, frame(0x01, section([(":method", "POST"), (":scheme", "https"), (":authority", "a"), (":path", "/"), ("content-length", "5")])))
                + record(stream: 0, fin: true, frame(0x00, Array("hello".utf8)))),
        ]
    }
}
