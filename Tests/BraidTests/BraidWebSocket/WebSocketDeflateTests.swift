import Testing

import BraidWebSocket

/// permessage-deflate (RFC 7692) in the engine: the negotiation both ways with each parameter,
/// offers a server must decline and answers a client must refuse, messages compressed both
/// ways (with and without context takeover, fragmented, with control frames between
/// fragments), the bounded inflation a deflate bomb meets, and the frames a hostile peer can
/// break it with.
@Suite struct WebSocketDeflateTests {
    typealias T = WebSocketTesting
    typealias N = WebSocketDeflateNegotiation

    func feed(_ engine: WebSocketConnection, _ bytes: [UInt8]) -> WebSocketError? {
        do {
            try bytes.withUnsafeBytes { try engine.receive($0) }
            return nil
        } catch {
            return error as? WebSocketError
        }
    }

    /// A compressed pair: both sides with `client` and `server` settings.
    func deflatePair(
        client: N.Settings = N.Settings(), server: N.Settings = N.Settings(),
        change: (inout WebSocketConnection.Configuration) -> Void = { _ in }
    ) throws -> (client: WebSocketConnection, server: WebSocketConnection) {
        let pair = try T.openPair(
            client: {
                $0.deflate = client
                change(&$0)
            },
            server: {
                $0.deflate = server
                change(&$0)
            })
        _ = (T.events(pair.client), T.events(pair.server))
        return pair
    }

    /// The frames `engine` queued, with their first byte's flags: (fin, rsv1, opcode, payload
    /// as sent, unmasked).
    func frames(_ engine: WebSocketConnection) -> [(fin: Bool, rsv1: Bool, opcode: UInt8, payload: [UInt8])] {
        var bytes: [UInt8] = []
        _ = engine.withPendingOutput { bytes.append(contentsOf: $0); return $0.count }
        var parser = WebSocketFrameParser()
        parser.allowsCompressedFrames = true
        var result: [(Bool, Bool, UInt8, [UInt8])] = []
        var current: WebSocketFrameHeader?
        var payload: [UInt8] = []
        try? bytes.withUnsafeBytes { buffer in
            try parser.parse(buffer) { piece in
                switch piece {
                case .header(let header):
                    current = header
                    payload = []
                case .payload(let piece, _): payload.append(contentsOf: piece)
                case .frameEnd:
                    if let key = current?.maskKey { payload.withUnsafeMutableBytes { WebSocketFrameHeader.mask($0, key: key, offset: 0) } }
                    result.append((current!.fin, current!.reserved & 0x4 != 0, current!.opcode, payload))
                }
            }
        }
        return result
    }

    /// `bytes` compressed as one permessage-deflate message (the trailer left off).
    func compress(_ bytes: [UInt8], windowBits: Int = 15) -> [UInt8] {
        let deflater = WebSocketDeflater(windowBits: windowBits, level: 6, memoryLevel: 8, noContextTakeover: true)!
        var output: [UInt8] = []
        bytes.withUnsafeBytes { deflater.compress($0, into: &output) }
        deflater.finishMessage(into: &output)
        return output
    }

    func text(_ count: Int) -> [UInt8] {
        let words = ["alpha ", "beta ", "gamma ", "δέλτα ", "epsilon "]
        var out: [UInt8] = []
        var index = 0
        while out.count < count {
            out += Array(words[index % words.count].utf8)
            index = (index * 7 + 3) % 1009
        }
        return Array(out.prefix(count))
    }

    // MARK: Negotiation

    @Test func clientOfferNamesEachSetting() {
        #expect(N.offer(N.Settings()) == "permessage-deflate; client_max_window_bits")
        var settings = N.Settings()
        settings.serverNoContextTakeover = true
        settings.clientNoContextTakeover = true
        settings.serverMaxWindowBits = 10
        settings.clientMaxWindowBits = 12
        #expect(
            N.offer(settings)
                == "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12")
    }

    @Test func defaultsAgreeOnFullWindowsWithContextTakeover() throws {
        let (client, server) = try deflatePair()
        let expected = N.Agreement()
        #expect(client.deflateAgreement == expected)
        #expect(server.deflateAgreement == expected)
        #expect(expected.responseValue == "permessage-deflate")
    }

    @Test func eachSidesSettingsReachTheAgreement() throws {
        var clientSettings = N.Settings()
        clientSettings.serverNoContextTakeover = true
        clientSettings.serverMaxWindowBits = 10
        var serverSettings = N.Settings()
        serverSettings.clientNoContextTakeover = true
        serverSettings.clientMaxWindowBits = 9
        let (client, server) = try deflatePair(client: clientSettings, server: serverSettings)
        var expected = N.Agreement()
        expected.serverNoContextTakeover = true
        expected.clientNoContextTakeover = true
        expected.serverMaxWindowBits = 10
        expected.clientMaxWindowBits = 9
        #expect(client.deflateAgreement == expected)
        #expect(server.deflateAgreement == expected)
        // Messages still cross both ways with the smaller windows.
        let message = text(100_000)
        try message.withUnsafeBytes { try client.send(.text, $0) }
        try T.move(client, to: server)
        #expect(T.events(server) == [.message(.text, message)])
        try message.withUnsafeBytes { try server.send(.text, $0) }
        try T.move(server, to: client)
        #expect(T.events(client) == [.message(.text, message)])
    }

    @Test func serverTakesTheSmallerOfTheOfferedAndItsOwnWindow() {
        var settings = N.Settings()
        settings.serverMaxWindowBits = 11
        settings.clientMaxWindowBits = 12
        let agreement = N.accept("permessage-deflate; server_max_window_bits=13; client_max_window_bits=10", settings: settings)
        #expect(agreement?.serverMaxWindowBits == 11)
        #expect(agreement?.clientMaxWindowBits == 10)
        #expect(agreement?.responseValue == "permessage-deflate; server_max_window_bits=11; client_max_window_bits=10")
    }

    @Test(arguments: [
        "permessage-deflate; unknown_parameter",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; client_max_window_bits=\"1\"5",
        "x-webkit-deflate-frame",
        "permessage-deflate; =",
        "permessage-deflate;; client_max_window_bits",
    ])
    func serverDeclinesAnOfferItCannotAccept(_ offer: String) throws {
        #expect(N.accept(offer, settings: N.Settings()) == nil)
        // The upgrade still succeeds, uncompressed.
        let server = T.server { $0.deflate = N.Settings() }
        server.start()
        let request =
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: \(offer)\r\n\r\n"
        #expect(feed(server, Array(request.utf8)) == nil)
        #expect(server.isOpen && server.deflateAgreement == nil)
        let response = String(decoding: T.sentBytes(server), as: UTF8.self)
        #expect(!response.lowercased().contains("sec-websocket-extensions"))
    }

    @Test func serverTakesTheFirstOfferItCanAccept() {
        let agreement = N.accept(
            "permessage-deflate; bogus, permessage-deflate; client_max_window_bits=\"12\"; server_no_context_takeover, permessage-deflate",
            settings: N.Settings())
        var expected = N.Agreement()
        expected.clientMaxWindowBits = 12
        expected.serverNoContextTakeover = true
        #expect(agreement == expected)
    }

    @Test func serverBoundingTheClientsWindowDeclinesAnOfferThatCannotBeBounded() {
        var settings = N.Settings()
        settings.clientMaxWindowBits = 10
        #expect(N.accept("permessage-deflate", settings: settings) == nil)
        #expect(N.accept("permessage-deflate; client_max_window_bits", settings: settings)?.clientMaxWindowBits == 10)
    }

    @Test func serverWithoutDeflateIgnoresTheOffer() throws {
        let (client, server) = try T.openPair(client: { $0.deflate = N.Settings() })
        #expect(client.deflateAgreement == nil && server.deflateAgreement == nil)
        try [UInt8](repeating: 7, count: 1000).withUnsafeBytes { try client.send(.binary, $0) }
        let sent = frames(client)
        #expect(sent.count == 1 && !sent[0].rsv1 && sent[0].payload.count == 1000)
    }

    @Test(arguments: [
        ("permessage-deflate; unknown", true),
        ("permessage-deflate; client_max_window_bits", true),
        ("permessage-deflate; server_max_window_bits=16", true),
        ("permessage-deflate, permessage-deflate", true),
        ("x-other", true),
        ("permessage-deflate; server_max_window_bits=12", false),
        ("permessage-deflate; client_max_window_bits=9; client_no_context_takeover; server_max_window_bits=11", false),
        ("permessage-deflate; client_max_window_bits=9; client_no_context_takeover", true),
    ])
    func clientChecksTheServersAnswer(_ answer: String, refused: Bool) {
        var settings = N.Settings()
        settings.serverMaxWindowBits = 12
        let agreement = try? N.validateResponse(answer, offered: settings)
        #expect((agreement == nil) == refused, "\(answer): \(String(describing: agreement))")
    }

    @Test func clientRefusesAnAnswerThatDropsWhatItAskedFor() {
        var settings = N.Settings()
        settings.serverNoContextTakeover = true
        #expect(throws: WebSocketError.self) { try N.validateResponse("permessage-deflate", offered: settings) }
        settings = N.Settings()
        settings.serverMaxWindowBits = 10
        #expect(throws: WebSocketError.self) { try N.validateResponse("permessage-deflate", offered: settings) }
        #expect(throws: WebSocketError.self) { try N.validateResponse("permessage-deflate; server_max_window_bits=11", offered: settings) }
        // Not offered at all.
        #expect(throws: WebSocketError.self) { try N.validateResponse("permessage-deflate", offered: nil) }
    }

    // MARK: Messages

    @Test func messagesCrossCompressedBothWays() throws {
        let (client, server) = try deflatePair()
        for size in [0, 1, 125, 126, 5000, 70000, 300_000] {
            let message = text(size)
            try message.withUnsafeBytes { try client.send(.text, $0) }
            let sent = frames(client)
            #expect(sent.first?.rsv1 == true && sent.first?.opcode == 0x1)
            #expect(sent.dropFirst().allSatisfy { !$0.rsv1 && $0.opcode == 0x0 })
            #expect(sent.last?.fin == true)
            try feedFrames(sent, to: server)
            #expect(T.events(server) == [.message(.text, message)])
            if size >= 5000 { #expect(sent.map(\.payload.count).reduce(0, +) < size / 2, "compressed") }
        }
        let binary = (0 ..< 50000).map { UInt8(truncatingIfNeeded: ($0 * 7919) % 251) }
        try binary.withUnsafeBytes { try server.send(.binary, $0) }
        try T.move(server, to: client)
        #expect(T.events(client) == [.message(.binary, binary)])
    }

    @Test func emptyMessagesBetweenOthersKeepTheContextWhole() throws {
        let (client, server) = try deflatePair()
        for message in [text(300), [], [], text(10), [], text(300)] {
            try message.withUnsafeBytes { try client.send(.text, $0) }
            try T.move(client, to: server)
            #expect(T.events(server) == [.message(.text, message)])
            try message.withUnsafeBytes { try server.send(.binary, $0) }
            try T.move(server, to: client)
            #expect(T.events(client) == [.message(.binary, message)])
        }
    }

    @Test func largeMessagesLeaveAsFragmentsOfTheFragmentSize() throws {
        let (client, _) = try deflatePair()
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let noise = (0 ..< 200_000).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state >> 32)
        }
        try client.beginFrame(.binary, length: noise.count)
        for start in stride(from: 0, to: noise.count, by: 7000) {
            noise[start ..< min(start + 7000, noise.count)].withUnsafeBytes { client.appendPayload($0) }
        }
        let sent = frames(client)
        #expect(sent.count > 5)
        #expect(sent.dropLast().allSatisfy { $0.payload.count == WebSocketConnection.compressedFragmentSize && !$0.fin })
    }

    @Test func contextTakeoverShrinksRepeatedMessages() throws {
        let (client, server) = try deflatePair()
        let message = text(2000)
        var sizes: [Int] = []
        for _ in 0 ..< 50 {
            try message.withUnsafeBytes { try client.send(.text, $0) }
            let sent = frames(client)
            sizes.append(sent.map(\.payload.count).reduce(0, +))
            try feedFrames(sent, to: server)
            #expect(T.events(server) == [.message(.text, message)])
        }
        // The second and later refer back to the first.
        #expect(sizes[1] < sizes[0] / 4, "\(sizes)")
        #expect(Set(sizes.dropFirst(2)).count <= 2)
    }

    @Test func noContextTakeoverCompressesEachMessageAlone() throws {
        var settings = N.Settings()
        settings.clientNoContextTakeover = true
        let (client, server) = try deflatePair(client: settings)
        let message = text(2000)
        var sizes: [Int] = []
        for _ in 0 ..< 20 {
            try message.withUnsafeBytes { try client.send(.text, $0) }
            let sent = frames(client)
            sizes.append(sent.map(\.payload.count).reduce(0, +))
            try feedFrames(sent, to: server)
            #expect(T.events(server) == [.message(.text, message)])
        }
        #expect(Set(sizes).count == 1, "\(sizes)")
    }

    @Test func eightBitWindowsSendStoredBlocks() throws {
        var settings = N.Settings()
        settings.clientMaxWindowBits = 8
        settings.serverMaxWindowBits = 8
        let (client, server) = try deflatePair(client: settings, server: settings)
        #expect(client.deflateAgreement?.clientMaxWindowBits == 8)
        let message = text(3000)
        try message.withUnsafeBytes { try client.send(.text, $0) }
        try T.move(client, to: server)
        #expect(T.events(server) == [.message(.text, message)])
    }

    @Test func compressedFragmentsWithControlFramesBetweenReassemble() throws {
        let (_, server) = try deflatePair()
        let message = text(10000)
        let compressed = compress(message)
        let cuts = [0, 1, 7, compressed.count / 2, compressed.count - 1, compressed.count]
        var bytes: [UInt8] = []
        for index in 0 ..< cuts.count - 1 {
            let piece = Array(compressed[cuts[index] ..< cuts[index + 1]])
            bytes += T.frame(index == 0 ? 0x1 : 0x0, piece, fin: index == cuts.count - 2, reserved: index == 0 ? 4 : 0)
            bytes += T.frame(0x9, [UInt8(index)])
        }
        #expect(feed(server, bytes) == nil)
        let events = T.events(server)
        // A ping after each of the five fragments, the message after the fifth fragment's.
        #expect(events.count == 6)
        #expect(events[4] == .message(.text, message))
        #expect(events.filter { if case .message(.ping, _) = $0 { true } else { false } }.count == 5)
    }

    @Test func uncompressedMessagesMixWithCompressedOnes() throws {
        let (_, server) = try deflatePair()
        let compressed = compress(Array("squeezed".utf8))
        #expect(feed(server, T.frame(0x1, Array("plain".utf8)) + T.frame(0x1, compressed, reserved: 4) + T.frame(0x2, [1, 2])) == nil)
        #expect(T.events(server) == [.message(.text, Array("plain".utf8)), .message(.text, Array("squeezed".utf8)), .message(.binary, [1, 2])])
    }

    // MARK: Hostile input

    @Test func deflateBombFailsAtTheMaximumWith1009() throws {
        let (_, server) = try deflatePair(change: { $0.maximumMessageSize = 1 << 20 })
        // 64 MiB of zeros compress to about 64 KiB.
        let deflater = WebSocketDeflater(windowBits: 15, level: 9, memoryLevel: 9, noContextTakeover: true)!
        var bomb: [UInt8] = []
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0 ..< 64 { zeros.withUnsafeBytes { deflater.compress($0, into: &bomb) } }
        deflater.finishMessage(into: &bomb)
        #expect(bomb.count < 200_000)
        let error = feed(server, T.frame(0x2, bomb, reserved: 4))
        #expect(error == .messageTooLarge(size: (1 << 20) + 1, maximum: 1 << 20))
        let sent = frames(server)
        #expect(sent.last?.opcode == 0x8 && T.closeCode(sent.last!.payload) == 1009)
        #expect(feed(server, T.frame(0x2, [1])) != nil)
    }

    @Test func compressedMessageExactlyAtTheMaximumIsDelivered() throws {
        let (_, server) = try deflatePair(change: { $0.maximumMessageSize = 4096 })
        let message = [UInt8](repeating: 0x61, count: 4096)
        #expect(feed(server, T.frame(0x1, compress(message), reserved: 4)) == nil)
        #expect(T.events(server) == [.message(.text, message)])
        let error = feed(server, T.frame(0x1, compress(message + [0x61]), reserved: 4))
        #expect(error?.closeCode == 1009)
    }

    @Test func compressedBytesAreBoundedToo() throws {
        let (_, server) = try deflatePair(change: { $0.maximumMessageSize = 1000 })
        // Empty stored blocks inflate to nothing; their count is bounded all the same.
        let error = feed(server, T.frame(0x2, [UInt8](repeating: 0, count: 1), fin: false, reserved: 4) + T.frame(0x0, [], fin: false, lengthOverride: 1 << 40))
        #expect(error?.closeCode == 1009)
    }

    @Test func corruptCompressedDataFailsWith1007() throws {
        let (_, server) = try deflatePair()
        let error = feed(server, T.frame(0x2, [0xFF, 0xFF, 0xFF, 0xFF, 0x00], reserved: 4))
        #expect(error?.closeCode == 1007)
        #expect(frames(server).last.map { T.closeCode($0.payload) } == 1007)
    }

    @Test func invalidUTF8InsideCompressedTextFailsWith1007() throws {
        let (_, server) = try deflatePair()
        #expect(feed(server, T.frame(0x1, compress([0x61, 0xED, 0xA0, 0x80]), reserved: 4))?.closeCode == 1007)
    }

    @Test func rsv1OnAContinuationFrameFailsWith1002() throws {
        let (_, server) = try deflatePair()
        let compressed = compress(text(100))
        let error = feed(server, T.frame(0x1, Array(compressed.prefix(5)), fin: false, reserved: 4) + T.frame(0x0, Array(compressed.dropFirst(5)), reserved: 4))
        #expect(error?.closeCode == 1002)
    }

    @Test func rsv1OnAControlFrameFailsWith1002() throws {
        let (_, server) = try deflatePair()
        #expect(feed(server, T.frame(0x9, [1], reserved: 4))?.closeCode == 1002)
    }

    @Test(arguments: [UInt8(2), 1, 6])
    func otherReservedBitsStillFailWith1002(_ reserved: UInt8) throws {
        let (_, server) = try deflatePair()
        #expect(feed(server, T.frame(0x2, [1], reserved: reserved))?.closeCode == 1002)
    }

    @Test func rsv1WithoutTheExtensionFailsWith1002() throws {
        let (_, server) = try T.openPair()
        #expect(feed(server, T.frame(0x2, compress([1, 2, 3]), reserved: 4))?.closeCode == 1002)
    }

    /// Re-frames `sent` frames as a client's (masked) for `server`.
    func feedFrames(_ sent: [(fin: Bool, rsv1: Bool, opcode: UInt8, payload: [UInt8])], to server: WebSocketConnection) throws {
        var bytes: [UInt8] = []
        for frame in sent { bytes += T.frame(frame.opcode, frame.payload, fin: frame.fin, reserved: frame.rsv1 ? 4 : 0) }
        try bytes.withUnsafeBytes { try server.receive($0) }
    }
}
