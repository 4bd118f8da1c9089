// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh
// websocket-frames with swiftc, together with tools/fuzz/WebSocketFramesFuzzMain.swift, against
// the modules of a sanitizer-instrumented SwiftPM build.
import BraidWebSocket

/// One fuzz input through WebSocket's frame parser and the engine's handling of frames, with
/// permessage-deflate on or off (no upgrade: both ends configured alike). What must hold for
/// any bytes: the parser hands on each frame's payload in order, its pieces adding up to the
/// header's length; no message delivered larger than the maximum, however it inflates; text
/// delivered only as valid UTF-8; control messages of at most 125 bytes; once the engine
/// throws it takes nothing more and throws the same error; what it holds to send stays bounded.
///
/// Input: byte 0 (bit 0: client, else server; bit 1: permessage-deflate; bit 2: no context
/// takeover both ways; bits 3-4: the maximum message size, 0, 125, 4096 or 65536; bit 5:
/// 8-bit windows, else 15; bit 6: autoReplyPing), byte 1 how the rest is cut into pieces, the
/// rest the peer's frames.
enum WebSocketFramesFuzzInput {
    struct Outcome {
        var messages: [WebSocketConnection.Event] = []
        var error: WebSocketError?
        var parserError: WebSocketError?
    }

    static let maximumSizes = [0, 125, 4096, 65536]

    static func configuration(_ flags: UInt8) -> WebSocketConnection.Configuration {
        var configuration = WebSocketConnection.Configuration(role: flags & 1 == 1 ? .client : .server)
        configuration.skipHandshake = true
        configuration.autoReplyPing = flags & 0x40 != 0
        configuration.maximumMessageSize = maximumSizes[Int(flags >> 3) & 3]
        if flags & 2 != 0 {
            var settings = WebSocketDeflateNegotiation.Settings()
            settings.serverNoContextTakeover = flags & 4 != 0
            settings.clientNoContextTakeover = flags & 4 != 0
            settings.serverMaxWindowBits = flags & 0x20 != 0 ? 8 : 15
            settings.clientMaxWindowBits = settings.serverMaxWindowBits
            configuration.deflate = settings
        }
        return configuration
    }

    /// The cut points: pieces of 1 to 31 bytes, from a sequence the seed starts.
    static func pieces(_ count: Int, seed: UInt8) -> [Range<Int>] {
        var pieceSeed = Int(seed) | 1
        var ranges: [Range<Int>] = []
        var offset = 0
        while offset < count {
            pieceSeed = (pieceSeed * 73 + 41) % 257
            let end = min(count, offset + 1 + pieceSeed % 31)
            ranges.append(offset ..< end)
            offset = end
        }
        return ranges
    }

    static func run(_ input: [UInt8]) -> Outcome {
        guard input.count >= 2 else { return Outcome() }
        let flags = input[0]
        let stream = Array(input[2...])
        let cuts = pieces(stream.count, seed: input[1])
        var outcome = Outcome()
        outcome.parserError = checkParser(stream, cuts: cuts, compressed: flags & 2 != 0)

        let configuration = configuration(flags)
        let engine = WebSocketConnection(configuration: configuration, random: WebSocketFuzzInput.counting())
        engine.start()
        for range in cuts {
            do {
                try stream[range].withUnsafeBytes { try engine.receive($0) }
            } catch {
                let failure = error as! WebSocketError
                if let earlier = outcome.error {
                    precondition(failure == earlier, "a failed engine threw another error")
                }
                outcome.error = failure
            }
            while let event = engine.pollEvent() {
                guard case .message(let opcode, let payload) = event else { continue }
                if opcode.isControl {
                    precondition(payload.count <= 125, "a control message over 125 bytes")
                } else {
                    precondition(payload.count <= configuration.maximumMessageSize, "a message over the maximum")
                }
                if opcode == .text {
                    precondition(payload.withUnsafeBytes { UTF8Validator.isValid($0) }, "text that is not UTF-8")
                }
                outcome.messages.append(event)
            }
            // One close, and pongs up to their backlog.
            precondition(engine.pendingOutputCount <= 200 + WebSocketConnection.pongBacklogLimit, "the engine holds too much to send")
        }
        return outcome
    }

    /// The parser alone over the same pieces: each frame's payload comes in order and adds up
    /// to its header's length. Returns the error it threw (nil: none).
    static func checkParser(_ stream: [UInt8], cuts: [Range<Int>], compressed: Bool) -> WebSocketError? {
        var parser = WebSocketFrameParser()
        parser.allowsCompressedFrames = compressed
        var current: WebSocketFrameHeader?
        var received: UInt64 = 0
        for range in cuts {
            do {
                try stream[range].withUnsafeBytes { bytes in
                    try parser.parse(bytes) { piece in
                        switch piece {
                        case .header(let header):
                            precondition(current == nil, "a header inside a frame")
                            precondition(header.reserved & (compressed && header.opcode < 8 ? 0x3 : 0x7) == 0, "reserved bits passed")
                            precondition(header.opcode < 8 || (header.fin && header.length <= 125), "a bad control frame passed")
                            current = header
                            received = 0
                        case .payload(let piece, let offset):
                            precondition(current != nil && offset == received, "a payload out of order")
                            received += UInt64(piece.count)
                            precondition(received <= current!.length, "more payload than the header's length")
                        case .frameEnd:
                            precondition(current != nil && received == current!.length, "a frame ended short")
                            current = nil
                        }
                    }
                }
            } catch {
                return error as? WebSocketError
            }
        }
        return nil
    }

    /// The committed seeds: compressed messages each way, fragments with control frames
    /// between, a deflate bomb, and the violations.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        func compress(_ messages: [[UInt8]], windowBits: Int = 15, noContextTakeover: Bool = false) -> [[UInt8]] {
            let deflater = WebSocketDeflater(windowBits: windowBits, level: 6, memoryLevel: 8, noContextTakeover: noContextTakeover)!
            return messages.map { message in
                var output: [UInt8] = []
                message.withUnsafeBytes { deflater.compress($0, into: &output) }
                deflater.finishMessage(into: &output)
                return output
            }
        }
        func masked(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false) -> [UInt8] {
            WebSocketTestingFrames.frame(opcode, payload, fin: fin, masked: true, reserved: rsv1 ? 4 : 0)
        }
        func plain(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false) -> [UInt8] {
            WebSocketTestingFrames.frame(opcode, payload, fin: fin, masked: false, reserved: rsv1 ? 4 : 0)
        }
        let hello = Array(String(repeating: "hello, κόσμε ", count: 20).utf8)
        let server: UInt8 = 2 | 3 << 3, client: UInt8 = 1 | 2 | 3 << 3
        let twice = compress([hello, hello])
        let alone = compress([hello, hello], noContextTakeover: true)
        let small = compress([hello], windowBits: 8)
        let bomb = compress([[UInt8](repeating: 0, count: 200_000)])
        let half = twice[0].count / 2
        return [
            ("server-deflate-message", [server, 7] + masked(0x1, twice[0], rsv1: true) + masked(0x2, [1, 2, 3])),
            ("server-deflate-context-takeover", [server, 5] + masked(0x1, twice[0], rsv1: true) + masked(0x1, twice[1], rsv1: true)),
            ("server-deflate-no-context-takeover", [server | 4, 9] + masked(0x1, alone[0], rsv1: true) + masked(0x1, alone[1], rsv1: true)),
            (
                "server-deflate-fragments-with-ping",
                [server, 11] + masked(0x1, Array(twice[0][..<half]), fin: false, rsv1: true) + masked(0x9, [9])
                    + masked(0x0, Array(twice[0][half...]))
            ),
            ("server-deflate-window-8", [server | 0x20, 3] + masked(0x1, small[0], rsv1: true)),
            ("server-deflate-bomb", [2 | 2 << 3, 13] + masked(0x2, bomb[0], rsv1: true)),
            ("server-deflate-corrupt", [server, 1] + masked(0x2, [0xFF, 0xFF, 0x00], rsv1: true)),
            ("server-deflate-rsv1-continuation", [server, 1] + masked(0x1, Array(twice[0][..<half]), fin: false, rsv1: true) + masked(0x0, Array(twice[0][half...]), rsv1: true)),
            ("server-deflate-rsv1-ping", [server, 1] + masked(0x9, [1], rsv1: true)),
            ("server-plain-rsv1", [3 << 3, 1] + masked(0x2, twice[0], rsv1: true)),
            ("client-deflate-messages", [client | 0x40, 7] + plain(0x1, twice[0], rsv1: true) + plain(0x9, [5]) + plain(0x1, twice[1], rsv1: true)),
        ]
    }
}
