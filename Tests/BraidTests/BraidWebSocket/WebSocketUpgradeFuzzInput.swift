// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh
// websocket-upgrade with swiftc, together with tools/fuzz/WebSocketUpgradeFuzzMain.swift, against
// the modules of a sanitizer-instrumented SwiftPM build.
import BraidWebSocket

/// One fuzz input through what WebSocket parses of the upgrade: the HTTP head (a client's
/// request to a server, a server's response to a client, fed to an engine in pieces) and the
/// `Sec-WebSocket-Extensions` grammar with permessage-deflate's negotiation. What must hold for
/// any bytes: no crash; a server answers a request it accepts with a 101 its own client would
/// accept, naming the extension exactly when it agreed to it; what either side agrees stays
/// within its settings (windows 8 to 15, no larger than allowed, no context takeover where it
/// asked); an offer Braid's client makes is always accepted by Braid's server, and the answer
/// validates to the same agreement; the head stays within its limit.
///
/// Input: byte 0 (bit 0: client, else server; bits 1-2: the settings, off, defaults, no
/// context takeover with 10- and 9-bit windows, or a 12-bit client window; bits 3-7 with byte 1:
/// another pair of settings for the round trip), byte 1 how the rest is cut into pieces, the
/// rest the peer's head, also read whole as an extensions header value.
enum WebSocketUpgradeFuzzInput {
    struct Outcome {
        var opened = false
        var agreement: WebSocketDeflateNegotiation.Agreement?
        var error: WebSocketError?
        var response: [UInt8] = []
    }

    static func settings(_ variant: Int) -> WebSocketDeflateNegotiation.Settings? {
        var settings = WebSocketDeflateNegotiation.Settings()
        switch variant & 3 {
        case 0: return nil
        case 1: break
        case 2:
            settings.serverNoContextTakeover = true
            settings.clientNoContextTakeover = true
            settings.serverMaxWindowBits = 10
            settings.clientMaxWindowBits = 9
        default:
            settings.clientMaxWindowBits = 12
        }
        return settings
    }

    /// Settings from 5 bits: each flag and window from the bits.
    static func settings(bits: Int) -> WebSocketDeflateNegotiation.Settings {
        var settings = WebSocketDeflateNegotiation.Settings()
        settings.serverNoContextTakeover = bits & 1 != 0
        settings.clientNoContextTakeover = bits & 2 != 0
        settings.serverMaxWindowBits = 8 + (bits >> 2) % 8
        settings.clientMaxWindowBits = 15 - (bits >> 1) % 8
        return settings
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

    static func checkWithin(_ agreement: WebSocketDeflateNegotiation.Agreement, _ settings: WebSocketDeflateNegotiation.Settings) {
        precondition((8...15).contains(agreement.serverMaxWindowBits) && (8...15).contains(agreement.clientMaxWindowBits), "a window outside 8 to 15")
        precondition(agreement.serverMaxWindowBits <= settings.serverMaxWindowBits, "a server window larger than allowed")
        precondition(agreement.clientMaxWindowBits <= settings.clientMaxWindowBits, "a client window larger than allowed")
        precondition(agreement.serverNoContextTakeover || !settings.serverNoContextTakeover, "server context takeover kept")
        precondition(agreement.clientNoContextTakeover || !settings.clientNoContextTakeover, "client context takeover kept")
    }

    static func run(_ input: [UInt8]) -> Outcome {
        guard input.count >= 2 else { return Outcome() }
        let flags = input[0]
        let stream = Array(input[2...])

        // Braid's own offer with one pair of settings always meets Braid's acceptance.
        let clientSettings = settings(bits: Int(flags >> 3)), serverSettings = settings(bits: Int(input[1]) & 31)
        if let agreement = WebSocketDeflateNegotiation.accept(WebSocketDeflateNegotiation.offer(clientSettings), settings: serverSettings) {
            checkWithin(agreement, serverSettings)
            let validated = try? WebSocketDeflateNegotiation.validateResponse(agreement.responseValue, offered: clientSettings)
            precondition(validated == agreement, "a server's answer to Braid's offer did not validate to the same agreement")
        } else {
            precondition(false, "Braid's server declined Braid's offer")
        }

        // The whole input as an extensions value, both ways.
        let value = String(decoding: stream, as: UTF8.self)
        if let elements = WebSocketDeflateNegotiation.parse(value) {
            precondition(elements.allSatisfy { !$0.name.isEmpty }, "an extension without a name")
        }
        let configured = settings(Int(flags >> 1)) ?? WebSocketDeflateNegotiation.Settings()
        if let agreement = WebSocketDeflateNegotiation.accept(value, settings: configured) { checkWithin(agreement, configured) }
        _ = try? WebSocketDeflateNegotiation.validateResponse(value, offered: configured)

        // The head through an engine, in pieces.
        var configuration = WebSocketConnection.Configuration(role: flags & 1 == 1 ? .client : .server)
        configuration.maximumHeadSize = 4096
        configuration.host = "example.com"
        configuration.subprotocols = ["chat"]
        configuration.deflate = settings(Int(flags >> 1))
        let engine = WebSocketConnection(configuration: configuration, random: WebSocketFuzzInput.counting())
        engine.start()
        var outcome = Outcome()
        if configuration.role == .client { _ = engine.withPendingOutput { $0.count } }
        for range in pieces(stream.count, seed: input[1]) where outcome.error == nil && !engine.isOpen {
            do {
                try stream[range].withUnsafeBytes { try engine.receive($0) }
            } catch {
                outcome.error = error as? WebSocketError
            }
        }
        _ = engine.withPendingOutput { outcome.response.append(contentsOf: $0); return $0.count }
        outcome.opened = engine.isOpen
        outcome.agreement = engine.deflateAgreement
        if let agreement = engine.deflateAgreement, let settings = configuration.deflate {
            if configuration.role == .server { checkWithin(agreement, settings) }
        }
        precondition(engine.deflateAgreement == nil || configuration.deflate != nil, "an agreement without deflate configured")
        if configuration.role == .server && engine.isOpen {
            // The 101 parses, and names the extension exactly when the server agreed to it.
            let end = outcome.response.count - 4
            precondition(end > 0, "a 101 without its blank line")
            let head = try? HTTPUpgradeHead(parsing: outcome.response[..<end])
            precondition(head?.startLine == "HTTP/1.1 101 Switching Protocols", "an open server did not answer 101")
            precondition((head?.value("sec-websocket-extensions") != nil) == (engine.deflateAgreement != nil), "the 101 misnamed the extension")
            if let agreement = engine.deflateAgreement {
                precondition(head?.value("sec-websocket-extensions") == agreement.responseValue, "the 101's extension is not the agreement")
            }
        }
        return outcome
    }

    /// The committed seeds: requests and responses with permessage-deflate offers and answers,
    /// good and bad.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        func request(_ extensions: String) -> [UInt8] {
            Array(
                ("GET /chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: \(extensions)\r\n\r\n").utf8)
        }
        func response(_ extensions: String) -> [UInt8] {
            Array(
                ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Accept: \(WebSocketHandshake.acceptValue(forKey: "AAECAwQFBgcICQoLDA0ODw=="))\r\n"
                    + "Sec-WebSocket-Extensions: \(extensions)\r\n\r\n").utf8)
        }
        let server: UInt8 = 1 << 1, client: UInt8 = 1 | 1 << 1, strict: UInt8 = 2 << 1
        return [
            ("server-offer-default", [server, 7] + request("permessage-deflate; client_max_window_bits")),
            ("server-offer-all", [strict, 5] + request("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12; client_max_window_bits=11")),
            ("server-offer-fallback", [server, 3] + request("x-webkit-deflate-frame, permessage-deflate; bogus, permessage-deflate; client_max_window_bits=\"10\"")),
            ("server-offer-bad-window", [server, 9] + request("permessage-deflate; server_max_window_bits=08")),
            ("server-offer-unbounded-client", [3 << 1, 11] + request("permessage-deflate")),
            ("server-offer-deflate-off", [0, 13] + request("permessage-deflate")),
            ("client-answer-default", [client, 7] + response("permessage-deflate")),
            ("client-answer-windows", [client, 5] + response("permessage-deflate; server_max_window_bits=10; client_max_window_bits=9")),
            ("client-answer-unknown", [client, 3] + response("permessage-deflate; unknown")),
            ("client-answer-no-value", [client, 1] + response("permessage-deflate; client_max_window_bits")),
            ("client-answer-unoffered", [1, 9] + response("permessage-deflate")),
            ("client-answer-quoted", [client, 15] + response("permessage-deflate; server_max_window_bits=\"1\\2\"")),
        ]
    }
}
