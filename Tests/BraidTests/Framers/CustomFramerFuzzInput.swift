// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh
// custom-framer with swiftc, together with tools/fuzz/CustomFramerFuzzMain.swift, against the
// modules of a sanitizer-instrumented SwiftPM build.
import BraidFramers
import BraidWebSocketIO
import Foundation

@testable import Braid

/// One fuzz input through a custom framer's input path: the peer's bytes, cut into pieces,
/// through a `FramerLayer` (over a pass-through layer) running one of four framers written the
/// ways real framers are. What must hold for any bytes: no crash; every record the layer
/// passes up decodes, none larger than the maximum message size, each with the framer's
/// message in the connection's table; the input the framer has not consumed stays within the
/// layer's bound; once the layer fails it keeps failing; and for the length-prefixed framer,
/// the messages delivered are exactly the whole messages of the input, up to the first one
/// over the maximum.
///
/// Input: byte 0 (bits 0-1: the framer, 0 length-prefixed in the TicTacToe sample's shape, 1
/// newline-delimited, 2 chunks delivered in parts with `deliverInput`, 3 a handshake then
/// pass-through; bits 2-3: the maximum message size, 0, 64, 4096 or 65536), byte 1 how the
/// rest is cut into pieces, the rest the peer's bytes. The layer's input bound is 512 bytes.
enum CustomFramerFuzzInput {
    static let maximumSizes = [0, 64, 4096, 65536]
    static let inputLimit = 512

    struct Outcome {
        /// Each message delivered: its kind (from the framer's message) and content.
        var messages: [(kind: UInt32, content: [UInt8])] = []
        var error: NetworkError?
    }

    static func run(_ input: [UInt8]) -> Outcome {
        guard input.count >= 2 else { return Outcome() }
        let framers: [NWProtocolFramer.Definition] = [
            FuzzLengthFramer.definition, FuzzLineFramer.definition, FuzzPartsFramer.definition, FuzzHandshakeFramer.definition,
        ]
        let choice = Int(input[0]) & 3
        let maximum = maximumSizes[Int(input[0] >> 2) & 3]
        let table = FramerMessages()
        let layer = FramerLayer(
            definition: framers[choice], maximumMessageSize: maximum, over: PlainByteStreamLayer(), messages: table, inputLimit: inputLimit)
        var decoder = TLVDecoder(maximumMessageSize: maximum)
        var outcome = Outcome()
        var pieceSeed = Int(input[1]) | 1
        let stream = Array(input[2...])
        var offset = 0
        var above: [UInt8] = []
        while offset < stream.count {
            pieceSeed = (pieceSeed * 73 + 41) % 257
            let end = min(stream.count, offset + 1 + pieceSeed % 61)
            let piece = stream[offset ..< end]
            offset = end
            _ = layer.withInputSpace(minimum: piece.count) { space in
                piece.withUnsafeBytes { space.copyMemory(from: $0) }
                return piece.count
            }
            do {
                _ = try layer.process { above.append(contentsOf: $0) }
            } catch {
                let failure = error as! NetworkError
                if let earlier = outcome.error {
                    precondition(failure == earlier, "a failed layer threw another error")
                }
                outcome.error = failure
            }
            precondition(layer.unconsumedInputCount < inputLimit || outcome.error != nil, "the framer's input passed its bound")
            decoder.append(above)
            above.removeAll()
            while true {
                let record: TLVMessage?
                do {
                    record = try decoder.next()
                } catch {
                    preconditionFailure("the layer passed up a record that does not decode: \(error)")
                }
                guard let record else { break }
                precondition(record.value.count <= maximum, "a message over the maximum")
                guard let message = table.takeInbound(record.type) else { preconditionFailure("a record without its framer message") }
                outcome.messages.append(((message["kind"] as? UInt32) ?? 0, [UInt8](record.value)))
            }
        }
        if choice == 0 { checkAgainstReference(stream, maximum: maximum, outcome) }
        return outcome
    }

    /// The length-prefixed framer delivers exactly the input's whole messages, up to the
    /// first over the maximum (which fails the layer).
    private static func checkAgainstReference(_ stream: [UInt8], maximum: Int, _ outcome: Outcome) {
        var expected: [(kind: UInt32, content: [UInt8])] = []
        var offset = 0
        var tooLarge = false
        while stream.count - offset >= 8 {
            let kind = stream[offset ..< offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let length = stream[offset + 4 ..< offset + 8].reduce(0) { $0 << 8 | Int($1) }
            if length > maximum {
                tooLarge = true
                break
            }
            guard stream.count - offset - 8 >= length else { break }
            expected.append((kind, Array(stream[offset + 8 ..< offset + 8 + length])))
            offset += 8 + length
        }
        precondition(outcome.messages.count == expected.count, "delivered \(outcome.messages.count) messages, the input holds \(expected.count)")
        for (got, want) in zip(outcome.messages, expected) {
            precondition(got.kind == want.kind && got.content == want.content, "a message delivered differs from the input's")
        }
        precondition(tooLarge == (outcome.error != nil), "the layer failed without a message over the maximum, or did not fail with one")
    }

    /// The committed seeds.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        func header(_ kind: UInt32, _ length: Int) -> [UInt8] {
            withUnsafeBytes(of: kind.bigEndian) { Array($0) } + withUnsafeBytes(of: UInt32(length).bigEndian) { Array($0) }
        }
        let sizes: UInt8 = 2 << 2  // 4096
        let big = [UInt8](repeating: 0x5A, count: 3000)
        return [
            ("length-messages", [0 | sizes, 7] + header(1, 5) + Array("hello".utf8) + header(2, 0) + header(3, 3000) + big),
            ("length-too-large", [0 | 1 << 2, 3] + header(1, 2) + [1, 2] + header(2, 65) + [UInt8](repeating: 1, count: 65)),
            ("length-truncated", [0 | sizes, 5] + header(1, 100) + [UInt8](repeating: 9, count: 40)),
            ("lines", [1 | sizes, 9] + Array("one\ntwo\n\nthree".utf8)),
            ("lines-without-newline", [1 | sizes, 11] + [UInt8](repeating: 0x41, count: 700)),
            ("parts", [2 | sizes, 13] + [0x83, 1, 2, 3, 0x02, 4, 5, 0x01, 6]),
            ("parts-too-large", [2 | 1 << 2, 17] + [0xFF] + [UInt8](repeating: 7, count: 127) + [0x7F] + [UInt8](repeating: 8, count: 127)),
            ("handshake-then-pass-through", [3 | sizes, 19] + [0xAA] + Array("raw bytes".utf8)),
            ("handshake-refused", [3 | sizes, 23] + [0x00, 1, 2]),
        ]
    }
}

/// Length-prefixed, in the TicTacToe sample's shape: kind and length (UInt32 each, network
/// order), content delivered with `deliverInputNoCopy`.
final class FuzzLengthFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: FuzzLengthFramer.self)
    static var label: String { "FuzzLength" }
    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var header: (kind: UInt32, length: UInt32)?
            let parsed = framer.parseInput(minimumIncompleteLength: 8, maximumLength: 8) { buffer, _ in
                guard let buffer, buffer.count >= 8 else { return 0 }
                header = (
                    UInt32(bigEndian: buffer.loadUnaligned(fromByteOffset: 0, as: UInt32.self)),
                    UInt32(bigEndian: buffer.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                )
                return 8
            }
            guard parsed, let header else { return 8 }
            let message = NWProtocolFramer.Message(instance: framer)
            message["kind"] = header.kind
            if !framer.deliverInputNoCopy(length: Int(header.length), message: message, isComplete: true) { return 0 }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        try? framer.writeOutputNoCopy(length: messageLength)
    }
}

/// Newline-delimited, asking for one more byte than it has seen until a newline arrives (the
/// way a delimiter framer waits).
final class FuzzLineFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: FuzzLineFramer.self)
    static var label: String { "FuzzLine" }
    private var wanted = 1
    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var line: Int?
            let parsed = framer.parseInput(minimumIncompleteLength: wanted, maximumLength: 1 << 20) { buffer, _ in
                guard let buffer else { return 0 }
                if let newline = buffer.firstIndex(of: 10) {
                    line = newline
                } else {
                    wanted = buffer.count + 1
                }
                return 0
            }
            guard parsed, let length = line else { return wanted }
            wanted = 1
            guard framer.deliverInputNoCopy(length: length, message: NWProtocolFramer.Message(instance: framer), isComplete: true) else { return 0 }
            _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { _, _ in 1 }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Chunks of one length byte (low 7 bits; the high bit: more of the message follows) and
/// that many bytes, copied out and delivered with `deliverInput`, a message in parts.
final class FuzzPartsFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: FuzzPartsFramer.self)
    static var label: String { "FuzzParts" }
    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var chunk: (more: Bool, bytes: Data)?
            _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 128) { buffer, _ in
                guard let buffer, let first = buffer.first else { return 0 }
                let length = Int(first & 0x7F)
                guard buffer.count >= 1 + length else { return 0 }
                chunk = (first & 0x80 != 0, Data(buffer[1 ..< 1 + length]))
                return 1 + length
            }
            guard let chunk else { return 2 }
            framer.deliverInput(data: chunk.bytes, message: NWProtocolFramer.Message(instance: framer), isComplete: !chunk.more)
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// A handshake of its own: ready once the peer's first byte is 0xAA (else failed), then every
/// byte passed through.
final class FuzzHandshakeFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: FuzzHandshakeFramer.self)
    static var label: String { "FuzzHandshake" }
    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult {
        framer.writeOutput(data: Data([0xAA]))
        return .willMarkReady
    }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        var greeting: UInt8?
        _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { buffer, _ in
            greeting = buffer?.first
            return 1
        }
        guard let greeting else { return 1 }
        guard greeting == 0xAA else {
            framer.markFailed(error: .posix(.EPROTO))
            return 0
        }
        framer.markReady()
        framer.passThroughInput()
        return 0
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}
