// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh perf with
// swiftc, together with tools/fuzz/PerfFuzzMain.swift, against the modules of a
// sanitizer-instrumented SwiftPM build.
import Braid
import BraidPerf
import Foundation

/// One fuzz input through what the perf and echo applications parse from their peer: a perf
/// request stream (`PerfRequest`, as `PerfServer` and `PerfService` read it) in pieces, and
/// the same bytes as an echoed datagram (`EchoDatagram`, as `braid client` reads it). What
/// must hold for any bytes: the request is the big-endian UInt64 of the first 8 bytes, the
/// upload the rest, counted and checked against the pattern; a stream that ends inside the
/// header throws `unexpectedEndOfStream`, bytes after the end `invalidState`; an echo is
/// accepted only if it is exactly the datagram the client sent with that number.
///
/// Input: byte 0 (bit 0: verify the upload, bit 1: the stream ends after the last piece), byte 1
/// how the rest is cut into pieces, byte 2 how many datagrams the echo client sent, the rest is
/// the stream and the datagram.
enum PerfFuzzInput {
    struct Outcome {
        var requested: UInt64?
        var uploaded = 0
        var uploadIntact = true
        var isComplete = false
        var error: NetworkError?
        /// The number of the echo, if the bytes are one the client accepts.
        var echoNumber: Int?
    }

    static let datagramCounts = [0, 1, 8, 1000, 1 << 20, Int(UInt32.max), Int.max]

    static func run(_ input: [UInt8]) -> Outcome {
        guard input.count >= 3 else { return Outcome() }
        let verify = input[0] & 1 == 1
        let ends = input[0] & 2 == 2
        var pieceSeed = Int(input[1]) | 1
        let stream = Array(input[3...])
        var request = PerfRequest(verifyUpload: verify)
        var outcome = Outcome()
        var offset = 0
        repeat {
            pieceSeed = (pieceSeed * 73 + 41) % 257
            let end = min(stream.count, offset + pieceSeed % 23)
            do {
                try request.append(stream[offset..<end], endOfStream: ends && end == stream.count)
            } catch {
                outcome.error = error
            }
            offset = end
        } while offset < stream.count && outcome.error == nil
        outcome.requested = request.requested
        outcome.uploaded = request.uploaded
        outcome.uploadIntact = request.uploadIntact
        outcome.isComplete = request.isComplete

        let header = PerfRequest.headerSize
        if stream.count >= header {
            let expected = stream.prefix(header).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            precondition(request.requested == expected, "the request is not the header's UInt64")
            precondition(request.responseSize == Int(clamping: expected), "the response size is not the request, clamped")
            precondition(request.uploaded == stream.count - header, "upload bytes lost or invented")
            precondition(request.uploadIntact == (!verify || PerfPattern.matches(stream[header...], at: 0)), "the pattern check is wrong")
            precondition(outcome.error == nil && request.isComplete == ends, "a whole request did not end as its stream did")
            if ends {
                // After the end, only another end (without bytes) is accepted.
                do {
                    try request.append([0], endOfStream: false)
                    preconditionFailure("bytes after the end were taken")
                } catch {
                    guard case .invalidState = error else { preconditionFailure("bytes after the end: \(error)") }
                }
            }
        } else {
            precondition(request.requested == nil && request.uploaded == 0 && !request.isComplete, "a request without its header")
            if ends {
                guard case .unexpectedEndOfStream(stream.count, header)? = outcome.error else {
                    preconditionFailure("a stream that ended inside the header: \(String(describing: outcome.error))")
                }
            } else {
                precondition(outcome.error == nil, "an unfinished header failed")
            }
        }

        let echo = Data(stream)
        let count = datagramCounts[Int(input[2]) % datagramCounts.count]
        for size in [stream.count, EchoDatagram.headerSize, 1000] {
            guard let number = EchoDatagram.number(ofEcho: echo, size: size, count: count) else { continue }
            precondition(number >= 0 && number < count, "an echo number outside what was sent")
            precondition(EchoDatagram.make(number: number, size: size) == echo, "an accepted echo is not the datagram sent")
            outcome.echoNumber = number
        }
        return outcome
    }

    /// The corpus's seeds (tools/fuzz.sh perf --seeds writes them).
    static func seeds() -> [String: [UInt8]] {
        func request(_ size: UInt64) -> [UInt8] { withUnsafeBytes(of: size.bigEndian) { Array($0) } }
        let upload = Array(PerfPattern.slice(at: 0, count: 1000))
        var corruptedUpload = upload
        corruptedUpload[500] ^= 1
        return [
            "request-4096": [2, 7, 0] + request(4096),
            "request-with-upload": [3, 7, 0] + request(10) + upload,
            "request-corrupted-upload": [3, 9, 0] + request(10) + corruptedUpload,
            "request-unfinished": [1, 7, 0] + request(1 << 30) + upload.prefix(10),
            "truncated-header": [2, 7, 0, 0, 0, 0, 0, 1],
            "request-above-int-max": [2, 3, 0] + request(UInt64.max),
            "echo-datagram-7": [0, 5, 3] + EchoDatagram.make(number: 7, size: 100),
        ]
    }
}
