// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh websocket
// with swiftc, together with tools/fuzz/WebSocketFuzzMain.swift, against the modules of a
// sanitizer-instrumented SwiftPM build.
import BraidWebSocket

/// One fuzz input through what a WebSocket engine parses from its peer: the upgrade (a
/// server's request, or a client's response) and then frames, fed in pieces. What must hold
/// for any bytes: no crash; no message delivered larger than the maximum; text delivered only
/// as valid UTF-8; control messages of at most 125 bytes; once the engine throws it takes
/// nothing more; what it holds to send stays bounded.
///
/// Input: byte 0 (bit 0: client, else server; bit 1: autoReplyPing; bit 2: skip the upgrade;
/// bits 3-4: the maximum message size, 0, 125, 4096 or 65536), byte 1 how the rest is cut into
/// pieces, the rest the peer's bytes. A client's masks and key come from a fixed sequence, so
/// its key is `AAECAwQFBgcICQoLDA0ODw==` and a response can carry the matching accept value.
enum WebSocketFuzzInput {
    struct Outcome {
        var opened = false
        var messages: [WebSocketConnection.Event] = []
        var error: WebSocketError?
    }

    static let maximumSizes = [0, 125, 4096, 65536]

    /// Bytes 0, 1, 2, ... in turn: the first key is bytes 0 to 15.
    static func counting() -> (inout [UInt8]) -> Void {
        var next: UInt8 = 0
        return { bytes in
            for index in bytes.indices {
                bytes[index] = next
                next &+= 1
            }
        }
    }

    static func run(_ input: [UInt8]) -> Outcome {
        guard input.count >= 2 else { return Outcome() }
        let flags = input[0]
        var configuration = WebSocketConnection.Configuration(role: flags & 1 == 1 ? .client : .server)
        configuration.autoReplyPing = flags & 2 != 0
        configuration.skipHandshake = flags & 4 != 0
        configuration.maximumMessageSize = maximumSizes[Int(flags >> 3) & 3]
        configuration.maximumHeadSize = 4096
        configuration.host = "example.com"
        configuration.subprotocols = ["chat"]
        let engine = WebSocketConnection(configuration: configuration, random: counting())
        engine.start()
        var outcome = Outcome()
        var pieceSeed = Int(input[1]) | 1
        let stream = Array(input[2...])
        var offset = 0
        while offset < stream.count {
            pieceSeed = (pieceSeed * 73 + 41) % 257
            let end = min(stream.count, offset + 1 + pieceSeed % 31)
            do {
                try stream[offset ..< end].withUnsafeBytes { try engine.receive($0) }
            } catch {
                let failure = error as! WebSocketError
                if let earlier = outcome.error {
                    precondition(failure == earlier, "a failed engine threw another error")
                }
                outcome.error = failure
            }
            offset = end
            while let event = engine.pollEvent() {
                switch event {
                case .opened: outcome.opened = true
                case .requestReceived: preconditionFailure("a request waiting for the application, which this configuration does not ask for")
                case .message(let opcode, let payload):
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
            }
            // The upgrade's answer, one close, and pongs up to their backlog.
            precondition(engine.pendingOutputCount <= 1024 + 200 + WebSocketConnection.pongBacklogLimit, "the engine holds too much to send")
        }
        return outcome
    }

    /// The committed seeds: a valid upgrade each way, frames after it, and the violations.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        let request = Array(
            ("GET /chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat\r\n\r\n").utf8)
        let response = Array(
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(WebSocketHandshake.acceptValue(forKey: "AAECAwQFBgcICQoLDA0ODw=="))\r\nSec-WebSocket-Protocol: chat\r\n\r\n").utf8)
        func masked(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true) -> [UInt8] { WebSocketTestingFrames.frame(opcode, payload, fin: fin, masked: true) }
        func plain(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true) -> [UInt8] { WebSocketTestingFrames.frame(opcode, payload, fin: fin, masked: false) }
        let server: UInt8 = 3 << 3, client: UInt8 = 1 | 3 << 3
        return [
            ("server-upgrade-and-messages", [server, 7] + request + masked(0x1, Array("hello".utf8)) + masked(0x2, [1, 2, 3])),
            ("server-fragments-with-ping", [server, 11] + request + masked(0x1, [0x41], fin: false) + masked(0x9, [9]) + masked(0x0, [0x42])),
            ("server-close", [server, 5] + request + masked(0x8, [0x03, 0xE8, 0x62, 0x79, 0x65])),
            ("server-unmasked", [server, 3] + request + plain(0x2, [1])),
            ("server-invalid-utf8", [server, 9] + request + masked(0x1, [0xED, 0xA0, 0x80])),
            ("server-oversize", [1 << 3, 1] + request + masked(0x2, [UInt8](repeating: 0, count: 126))),
            ("server-auto-ping", [server | 2, 13] + request + masked(0x9, [1]) + masked(0x9, [2])),
            ("client-upgrade-and-messages", [client, 7] + response + plain(0x1, Array("κόσμε".utf8)) + plain(0xA, [])),
            ("client-masked-frame", [client, 3] + response + masked(0x2, [1])),
            ("skip-handshake-frames", [server | 4, 1] + masked(0x2, [5, 6]) + masked(0x1, Array("hi".utf8))),
        ]
    }
}

/// Frames for the seeds, masked with a fixed key.
enum WebSocketTestingFrames {
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool, masked: Bool, reserved: UInt8 = 0) -> [UInt8] {
        var bytes: [UInt8] = []
        let key: (UInt8, UInt8, UInt8, UInt8)? = masked ? (0x37, 0xFA, 0x21, 0x3D) : nil
        WebSocketFrameHeader(fin: fin, reserved: reserved, opcode: opcode, maskKey: key, length: UInt64(payload.count)).write(into: &bytes)
        var body = payload
        if let key { body.withUnsafeMutableBytes { WebSocketFrameHeader.mask($0, key: key, offset: 0) } }
        return bytes + body
    }
}
