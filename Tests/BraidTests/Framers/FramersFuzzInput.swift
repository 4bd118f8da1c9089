// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh framers
// with swiftc, together with Sources/BraidFramers and tools/fuzz/FramersFuzzMain.swift, into
// one libFuzzer module (where BraidFramers is not a separate module).
#if canImport(BraidFramers)
import BraidFramers
#endif
import Foundation

/// One fuzz input through the TLV decoder and the Coder decode path, checking what must hold
/// for any bytes: whole messages come out in order and re-encode to exactly the bytes they came
/// from, the decoder never holds more than it was given, it fails only on a header above the
/// maximum, and a Coder decode either returns a value or throws `CoderFramingError`. The
/// stream is also decoded whole as one `Coder`-over-UDP datagram (bare encoded bytes).
enum FramersFuzzInput {
    /// What the Coder path decodes messages as.
    struct Sample: Codable, Equatable {
        var name: String
        var values: [Int]
        var nested: [String: Double]?
    }

    struct Outcome {
        var messages = 0
        var decoded = 0
        var decodeErrors = 0
        /// Decodes of the whole stream as one datagram that returned a value (JSON and plist).
        var datagramDecoded = 0
        var framingError: TLVFramingError?
    }

    /// Byte 0 picks the maximum message size (and, with its high bit, values that share the
    /// pieces' storage, as `Coder` takes them), byte 1 how the rest is cut into pieces, the
    /// rest is the stream.
    static func run(_ input: [UInt8]) -> Outcome {
        guard input.count >= 2 else { return Outcome() }
        let maximum = [0, 1, 8, 64, 1000, 4096, TLVFraming.defaultMaximumMessageSize][Int(input[0]) % 7]
        let sharingStorage = input[0] >= 0x80
        let stream = Array(input[2...])
        var pieceSeed = Int(input[1]) | 1
        var decoder = TLVDecoder(maximumMessageSize: maximum)
        var outcome = Outcome()
        var reencoded: [UInt8] = []
        var offset = 0
        feeding: while offset < stream.count {
            pieceSeed = (pieceSeed * 73 + 41) % 257
            let end = min(stream.count, offset + pieceSeed % 97 + 1)
            decoder.append(stream[offset..<end])
            offset = end
            precondition(decoder.bufferedByteCount <= stream.count, "the decoder holds more than it was given")
            while true {
                do {
                    guard let message = try decoder.next(sharingStorage: sharingStorage) else { break }
                    precondition(message.value.count <= maximum, "a message above the maximum")
                    outcome.messages += 1
                    reencoded += try TLVEncoder.encode(type: message.type, value: message.value)
                    decodeAsCoder(message, into: &outcome)
                } catch {
                    // Typed: `next` and `encode` throw only `TLVFramingError`.
                    guard case .messageTooLarge(_, let size, let limit) = error, size > UInt64(limit), limit == maximum else {
                        preconditionFailure("a framing error for an acceptable header: \(error)")
                    }
                    outcome.framingError = error
                    break feeding
                }
            }
        }
        decodeAsDatagram(stream, into: &outcome)
        precondition(Array(stream.prefix(reencoded.count)) == reencoded, "messages do not re-encode to their bytes")
        if outcome.framingError == nil {
            precondition(reencoded.count + decoder.bufferedByteCount == stream.count, "bytes lost or invented")
        }
        return outcome
    }

    /// `Coder` over UDP: the whole stream as one datagram, no TLV header.
    private static func decodeAsDatagram(_ stream: [UInt8], into outcome: inout Outcome) {
        let datagram = Data(stream)
        for useJSON in [true, false] {
            do {
                if useJSON {
                    _ = try CoderFraming.decode(Sample.self, from: datagram, using: .json)
                } else {
                    _ = try CoderFraming.decode(Sample.self, from: datagram, using: .propertyList)
                }
                outcome.datagramDecoded += 1
            } catch {
                // Typed: only `CoderFramingError`.
                guard case .decodingFailed = error else { preconditionFailure("a datagram decode failed with \(error)") }
            }
        }
    }

    private static func decodeAsCoder(_ message: TLVMessage, into outcome: inout Outcome) {
        // Decoded under any type number, so the JSON and property-list parsers see every value.
        let asCoderMessage = TLVMessage(type: CoderFraming.messageType, value: message.value)
        for useJSON in [true, false] {
            do {
                if useJSON {
                    _ = try CoderFraming.decode(Sample.self, from: asCoderMessage, using: .json)
                } else {
                    _ = try CoderFraming.decode(Sample.self, from: asCoderMessage, using: .propertyList)
                }
                outcome.decoded += 1
            } catch {
                outcome.decodeErrors += 1
            }
        }
    }
}
