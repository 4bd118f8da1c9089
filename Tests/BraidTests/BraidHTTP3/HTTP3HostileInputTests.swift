import BraidCore
import BraidHTTP3
import Testing

/// What the engine does with a peer that breaks the rules: malformed messages end their
/// stream with H3_MESSAGE_ERROR, oversized header sections with H3_EXCESSIVE_LOAD, and bad
/// control or QPACK streams close the connection with the code nghttp3 0.8 reports. Never a
/// crash, and the other requests carry on after a stream error.
@Suite struct HTTP3HostileInputTests {
    typealias Side = HTTP3Pipe.Side

    /// A HEADERS frame around a QPACK field section written by hand (nghttp3's own encoder
    /// lowercases names, so a malformed section has to be built): no dynamic table, then
    /// `lines`, each already encoded.
    static func headersFrame(_ lines: [[UInt8]]) -> [UInt8] {
        let section: [UInt8] = [0x00, 0x00] + lines.flatMap { $0 }
        precondition(section.count < 64)
        return [0x01, UInt8(section.count)] + section
    }

    /// QPACK lines: static-table entries (RFC 9204 appendix A) and literals.
    static let methodGET: [UInt8] = [0xC0 | 17]
    static let schemeHTTPS: [UInt8] = [0xC0 | 23]
    static let pathRoot: [UInt8] = [0xC0 | 1]
    static let authority: [UInt8] = [0x50 | 0, 11] + Array("example.com".utf8)
    static let status200: [UInt8] = [0xC0 | 25]
    /// A literal field line with a literal name (names shorter than 7 bytes).
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        precondition(name.utf8.count < 7 && value.utf8.count < 127)
        return [0x20 | UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
    }

    /// Delivers `lines` as a request on the client's first stream (bypassing its engine) and
    /// checks the server ends that stream with H3_MESSAGE_ERROR while a good request on the
    /// same connection is answered.
    func expectMalformedRequest(_ lines: [[UInt8]]) throws {
        let pipe = try HTTP3Pipe(seed: 21)
        pipe.serverApp.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok(), body: [1, 2, 3]) }
        let bad = pipe.openRequestStream()
        pipe.inject(from: .client, streamID: bad, bytes: Self.headersFrame(lines), fin: true)
        let good = try pipe.request(HTTP3EngineTests.get("/good"))
        #expect(pipe.run { pipe.clientApp.messages[good]?.ended == true && pipe.serverApp.messages[bad]?.streamError != nil })
        #expect(pipe.serverApp.messages[bad]?.streamError == .messageError)
        #expect(pipe.serverApp.messages[bad]?.headers.isEmpty ?? true)
        #expect(pipe.actions[.server]!.contains(.resetStream(streamID: bad, code: .messageError)))
        #expect(pipe.actions[.server]!.contains(.stopSending(streamID: bad, code: .messageError)))
        #expect(pipe.clientApp.messages[good]?.body == [1, 2, 3])
        #expect(pipe.closes.isEmpty)
        // No response can go out on the stream the server reset.
        #expect(throws: HTTP3Error.self) { try pipe.server.sendResponse(streamID: bad, fields: HTTP3EngineTests.ok()) }
    }

    @Test func wellFormedHandBuiltRequestIsAccepted() throws {
        // The control case for the hand-built sections below: the same encoding, valid.
        let pipe = try HTTP3Pipe(seed: 20)
        pipe.serverApp.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok()) }
        let id = pipe.openRequestStream()
        pipe.inject(from: .client, streamID: id, bytes: Self.headersFrame([Self.methodGET, Self.schemeHTTPS, Self.authority, Self.pathRoot, Self.literal("x-up", "1")]), fin: true)
        #expect(pipe.run { pipe.serverApp.messages[id]?.ended == true })
        #expect(pipe.serverApp.messages[id]?.fields == HTTP3EngineTests.get("/") + [HTTP3Field("x-up", "1")])
    }

    @Test func uppercaseHeaderNameIsAStreamError() throws {
        try expectMalformedRequest([Self.methodGET, Self.schemeHTTPS, Self.pathRoot, Self.authority, Self.literal("X-Up", "1")])
    }

    @Test func missingMethodIsAStreamError() throws {
        try expectMalformedRequest([Self.schemeHTTPS, Self.pathRoot, Self.authority])
    }

    @Test func unknownPseudoHeaderIsAStreamError() throws {
        try expectMalformedRequest([Self.methodGET, Self.schemeHTTPS, Self.pathRoot, Self.authority, Self.literal(":bogus", "1")])
    }

    @Test func pseudoHeaderAfterRegularFieldIsAStreamError() throws {
        try expectMalformedRequest([Self.methodGET, Self.schemeHTTPS, Self.literal("x-up", "1"), Self.pathRoot, Self.authority])
    }

    @Test func malformedResponseIsAStreamErrorOnTheClient() throws {
        let pipe = try HTTP3Pipe(seed: 22)
        let id = try pipe.request(HTTP3EngineTests.get("/"))
        pipe.run()
        // The server's application does not answer; a response with an uppercase name
        // arrives on the stream instead.
        pipe.inject(from: .server, streamID: id, bytes: Self.headersFrame([Self.status200, Self.literal("Bad", "x")]), fin: true)
        #expect(pipe.run { pipe.clientApp.messages[id]?.streamError != nil })
        #expect(pipe.clientApp.messages[id]?.streamError == .messageError)
        #expect(pipe.clientApp.messages[id]?.headers.isEmpty ?? true)
        #expect(pipe.actions[.client]!.contains(.stopSending(streamID: id, code: .messageError)))
        #expect(pipe.closes.isEmpty)
    }

    @Test func responseWithoutStatusIsAStreamErrorOnTheClient() throws {
        let pipe = try HTTP3Pipe(seed: 26)
        let id = try pipe.request(HTTP3EngineTests.get("/"))
        pipe.run()
        pipe.inject(from: .server, streamID: id, bytes: Self.headersFrame([Self.literal("x-up", "1")]), fin: true)
        #expect(pipe.run { pipe.clientApp.messages[id]?.streamError != nil })
        #expect(pipe.clientApp.messages[id]?.streamError == .messageError)
    }

    @Test func oversizedHeaderSectionEndsTheStreamWithExcessiveLoad() throws {
        var small = HTTP3Configuration()
        small.maxFieldSectionSize = 1000
        let pipe = try HTTP3Pipe(seed: 23, server: small)
        pipe.serverApp.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok()) }
        let big = try pipe.request(HTTP3EngineTests.get("/") + (0..<40).map { HTTP3Field("x-filler-\($0)", String(repeating: "v", count: 100)) })
        let fine = try pipe.request(HTTP3EngineTests.get("/fine"))
        #expect(pipe.run { pipe.clientApp.messages[fine]?.ended == true && pipe.clientApp.messages[big]?.reset != nil })
        #expect(pipe.serverApp.messages[big]?.streamError == .excessiveLoad)
        #expect(pipe.serverApp.messages[big]?.headers.isEmpty ?? true)
        #expect(pipe.clientApp.messages[big]?.reset == .excessiveLoad)
        #expect(pipe.closes.isEmpty)
    }

    /// A header section that never ends (a slowloris): the server engine holds its decoded
    /// fields, which `receivingFieldSectionBytes` counts as RFC 9114 does. `abandonRequest`
    /// ends the stream with the code given (STOP_SENDING and RESET_STREAM), frees the fields,
    /// and no event reports the request; on a stream the engine has not read a byte of it does
    /// the same. A request on another stream is answered afterwards.
    @Test func anAbandonedRequestFreesItsFieldsAndReachesNoApplication() throws {
        let pipe = try HTTP3Pipe(seed: 32)
        pipe.serverApp.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok()) }
        let slow = pipe.openRequestStream()
        let padding = String(repeating: "p", count: 100)
        // HEADERS announcing 16,383 bytes, the section's prefix, and far fewer bytes of fields.
        let lines = [Self.methodGET, Self.schemeHTTPS, Self.authority, Self.pathRoot] + (0..<3).map { _ in Self.literal("x-pad", padding) }
        pipe.inject(from: .client, streamID: slow, bytes: [0x01, 0x7F, 0xFF, 0x00, 0x00] + lines.flatMap { $0 })
        pipe.run()
        // Name + value + 32 per field.
        let held = (7 + 3 + 32) + (7 + 5 + 32) + (10 + 11 + 32) + (5 + 1 + 32) + 3 * (5 + 100 + 32)
        #expect(pipe.server.receivingFieldSectionBytes == held)
        #expect(pipe.serverApp.messages[slow] == nil)

        pipe.server.abandonRequest(streamID: slow, code: .requestRejected)
        #expect(pipe.server.receivingFieldSectionBytes == 0)
        let unread = pipe.openRequestStream()
        pipe.server.abandonRequest(streamID: unread, code: .requestRejected)
        let good = try pipe.request(HTTP3EngineTests.get("/good"))
        #expect(pipe.run { pipe.clientApp.messages[good]?.ended == true })
        for id in [slow, unread] {
            #expect(pipe.actions[.server]!.contains(.stopSending(streamID: id, code: .requestRejected)))
            #expect(pipe.actions[.server]!.contains(.resetStream(streamID: id, code: .requestRejected)))
            #expect(pipe.serverApp.messages[id] == nil)
        }
        #expect(pipe.server.receivingFieldSectionBytes == 0)
        #expect(pipe.closes.isEmpty)
    }

    /// Holds the client's own control and QPACK streams back and delivers `bytes` on another
    /// client unidirectional stream instead; returns the code the server closed with.
    func serverClose(afterClientStream bytes: [UInt8], fin: Bool = false) throws -> HTTP3ErrorCode? {
        let pipe = try HTTP3Pipe(seed: 24)
        pipe.heldToServer = [2, 6, 10]
        pipe.inject(from: .client, streamID: 14, bytes: bytes, fin: fin)
        pipe.run { !pipe.closes.isEmpty }
        let code = pipe.closes[.server]
        // The server's application heard the same failure, and the client heard the close.
        if let code {
            #expect(pipe.serverApp.connectionErrors.count == 1)
            if case .connectionError(let heard, _, let byPeer) = pipe.serverApp.connectionErrors.first {
                #expect(heard == code)
                #expect(!byPeer)
            }
            #expect(pipe.clientApp.connectionErrors.count == 1)
            if case .connectionError(let heard, _, let byPeer) = pipe.clientApp.connectionErrors.first {
                #expect(heard == code)
                #expect(byPeer)
            }
        }
        // Every later call on the failed engine is refused, not a crash.
        #expect(throws: HTTP3Error.self) { try pipe.server.shutdown() }
        #expect(pipe.server.nextWrite() == nil)
        return code
    }

    @Test func controlStreamWithoutSettingsClosesWithMissingSettings() throws {
        // Control stream type, then a DATA frame where SETTINGS must be.
        #expect(try serverClose(afterClientStream: [0x00, 0x00, 0x01, 0xAA]) == .missingSettings)
    }

    @Test func dataFrameOnControlStreamClosesWithFrameUnexpected() throws {
        // Control stream type, empty SETTINGS, then a DATA frame.
        #expect(try serverClose(afterClientStream: [0x00, 0x04, 0x00, 0x00, 0x01, 0xAA]) == .frameUnexpected)
    }

    @Test func truncatedSettingsClosesWithFrameError() throws {
        // SETTINGS of length 2 holding an identifier whose two-byte value is cut off by the
        // frame's end.
        let code = try serverClose(afterClientStream: [0x00, 0x04, 0x02, 0x06, 0x44, 0x00, 0x00])
        #expect(code == .frameError, "\(String(describing: code))")
    }

    @Test func closedControlStreamClosesWithClosedCriticalStream() throws {
        #expect(try serverClose(afterClientStream: [0x00, 0x04, 0x00], fin: true) == .closedCriticalStream)
    }

    @Test func garbageOnQPACKEncoderStreamClosesWithQPACKError() throws {
        // Encoder stream type, then "insert with name reference" to a static index that
        // does not exist (0xFF 0xFF 0x7F: index 63 + 0x7F + ...).
        #expect(try serverClose(afterClientStream: [0x02, 0xFF, 0xFF, 0xFF, 0x7F, 0x01, 0x41]) == .qpackEncoderStreamError)
    }

    @Test func secondControlStreamClosesWithStreamCreationError() throws {
        let pipe = try HTTP3Pipe(seed: 25)
        pipe.run()
        pipe.inject(from: .client, streamID: 14, bytes: [0x00, 0x04, 0x00])
        pipe.run { !pipe.closes.isEmpty }
        #expect(pipe.closes[.server] == .streamCreationError)
    }

    @Test func randomBytesOnEveryStreamNeverCrash() throws {
        var random = SeededRandom(seed: 99)
        for round in 0..<200 {
            let pipe = try HTTP3Pipe(seed: UInt64(round))
            pipe.serverApp.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok(), body: [1]) }
            try pipe.request(HTTP3EngineTests.get("/"))
            let stream: Int64 = [0, 2, 6, 10, 14, 4][Int(random.next() % 6)]
            if stream == 2 || stream == 6 || stream == 10 { pipe.heldToServer.insert(stream) }
            let count = Int(random.next() % 40)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            pipe.inject(from: .client, streamID: stream, bytes: bytes, fin: random.next() % 2 == 0)
            pipe.run(maxSteps: 10_000)
            // Whatever the bytes did, it was the peer's fault, never an internal failure.
            #expect(pipe.closes[.server] != .internalError, "round \(round): \(pipe.serverApp.connectionErrors)")
            #expect(pipe.closes[.client] == nil)
        }
    }

    @Test func resetControlStreamClosesWithClosedCriticalStream() throws {
        let pipe = try HTTP3Pipe(seed: 27)
        pipe.run()
        pipe.server.peerResetStream(streamID: 2, code: HTTP3ErrorCode.noError.code)
        pipe.run { !pipe.closes.isEmpty }
        #expect(pipe.closes[.server] == .closedCriticalStream)
    }

    @Test func stopSendingOnOurControlStreamClosesWithClosedCriticalStream() throws {
        let pipe = try HTTP3Pipe(seed: 28)
        pipe.run()
        pipe.server.peerStoppedSending(streamID: 3, code: HTTP3ErrorCode.noError.code)
        pipe.run { !pipe.closes.isEmpty }
        #expect(pipe.closes[.server] == .closedCriticalStream)
    }

    @Test func resetOfAnUnknownUnidirectionalStreamIsIgnored() throws {
        let pipe = try HTTP3Pipe(seed: 29)
        pipe.serverApp.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok()) }
        // A reserved (grease) stream type, 0x21, then a reset of it.
        pipe.inject(from: .client, streamID: 14, bytes: [0x40, 0x21, 0xAB])
        pipe.run()
        pipe.server.peerResetStream(streamID: 14, code: HTTP3ErrorCode.noError.code)
        let id = try pipe.request(HTTP3EngineTests.get("/"))
        #expect(pipe.run { pipe.clientApp.messages[id]?.ended == true })
        #expect(pipe.closes.isEmpty)
    }

    @Test func serverPushStreamClosesWithStreamCreationError() throws {
        // The client never allows a push (no MAX_PUSH_ID): a push stream is refused.
        let pipe = try HTTP3Pipe(seed: 30)
        pipe.run()
        pipe.inject(from: .server, streamID: 15, bytes: [0x01, 0x00])
        pipe.run { !pipe.closes.isEmpty }
        #expect(pipe.closes[.client] == .streamCreationError)
    }

    @Test func pushPromiseOnARequestStreamClosesWithFrameUnexpected() throws {
        let pipe = try HTTP3Pipe(seed: 31)
        let id = try pipe.request(HTTP3EngineTests.get("/"))
        pipe.run()
        // PUSH_PROMISE (type 0x05), push ID 0 and an empty field section.
        pipe.inject(from: .server, streamID: id, bytes: [0x05, 0x03, 0x00, 0x00, 0x00])
        pipe.run { !pipe.closes.isEmpty }
        #expect(pipe.closes[.client] == .frameUnexpected)
    }
}
