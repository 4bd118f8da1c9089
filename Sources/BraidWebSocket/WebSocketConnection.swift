import CBraid

/// One WebSocket connection (RFC 6455), sans IO: bytes in (`receive`), events out
/// (`pollEvent`), frames out (`withPendingOutput`). No sockets, clocks or threads; owned by one
/// loop, like the other engines.
///
/// Receiving reassembles fragmented messages (control frames may come between fragments),
/// checks masking (a server rejects unmasked frames, a client masked ones), checks text as
/// UTF-8 as it arrives, and refuses a message larger than the maximum at the frame header that
/// would pass it, before buffering any of it. With permessage-deflate agreed (RFC 7692), a
/// compressed message is inflated as its frames arrive, its inflated size bounded by the same
/// maximum, and data messages sent are compressed. A violation queues the close frame its code
/// calls for, then throws; whatever the engine holds is bounded by the maximum message size,
/// one control frame and the upgrade's header limit (with compression, also zlib's state, one
/// received piece of compressed bytes and less than a fragment of compressed bytes to send).
package final class WebSocketConnection {
    package enum Role: Sendable { case client, server }

    package struct Configuration: Sendable {
        package var role: Role
        /// The largest message accepted from the peer, in bytes.
        package var maximumMessageSize = 16 * 1024 * 1024
        /// Pings are answered by the engine and not reported.
        package var autoReplyPing = false
        /// No upgrade: frames from the first byte (with `deflate`, compressed as its settings
        /// say, both ends configured alike).
        package var skipHandshake = false
        /// Client: offered in order. Server: accepted, the client's first match chosen.
        package var subprotocols: [String] = []
        /// Sent with the request (client) or the 101 response (server).
        package var additionalHeaders: [(name: String, value: String)] = []
        /// Client: the `Host` header and the request target.
        package var host = ""
        package var path = "/"
        /// The largest upgrade head read from the peer.
        package var maximumHeadSize = 16 * 1024
        /// permessage-deflate (RFC 7692): a client offers it with these settings, a server
        /// accepts an offer with them. Nil: off (nothing offered, offers declined).
        package var deflate: WebSocketDeflateNegotiation.Settings?
        /// Server: the application answers each valid request (`Event.requestReceived`, then
        /// `respond(with:)`) instead of `subprotocols` choosing.
        package var applicationAnswersRequests = false

        package init(role: Role) { self.role = role }
    }

    /// What the engine reports.
    package enum Event: Equatable {
        /// The handshake completed (at once with `skipHandshake`).
        case opened(subprotocol: String?)
        /// Server answering requests itself: a valid upgrade request waits for `respond(with:)`.
        case requestReceived(WebSocketClientRequest)
        /// A whole message, or a control frame: text, binary, ping (unless answered), pong, or
        /// close (its raw payload: code and reason). Nothing is reported after a close.
        case message(WebSocketOpcode, [UInt8])
    }

    /// Output held beyond which automatic pongs are dropped.
    package static let pongBacklogLimit = 64 * 1024

    package let configuration: Configuration
    private let random: (inout [UInt8]) -> Void

    // Handshake.
    private var head: HTTPUpgradeHeadBuffer
    private var clientKey = ""
    /// Server: the request the application has yet to answer.
    private var pendingRequest: HTTPUpgradeHead?
    /// Server: a request waits for the application's answer (`respond(with:)`).
    package var awaitsAnswer: Bool { pendingRequest != nil }
    package private(set) var isOpen = false
    package private(set) var subprotocol: String?
    /// permessage-deflate as agreed in the upgrade (nil: messages travel uncompressed).
    package private(set) var deflateAgreement: WebSocketDeflateNegotiation.Agreement?
    /// The extensions in effect as the server's `Sec-WebSocket-Extensions` named them (nil:
    /// none).
    package private(set) var extensionsHeader: String?
    private var deflater: WebSocketDeflater?
    private var inflater: WebSocketInflater?

    // Receiving.
    private var parser = WebSocketFrameParser()
    private var frame: WebSocketFrameHeader?
    private var messageOpcode: WebSocketOpcode?
    private var message: [UInt8] = []
    private var control: [UInt8] = []
    private var text = UTF8Validator()
    /// Where the current frame's payload starts in `message`.
    private var frameStartInMessage = 0
    /// The message being received is compressed (RSV1 on its first frame).
    private var messageCompressed = false
    /// Compressed bytes of the message so far.
    private var compressedReceived: UInt64 = 0
    /// A compressed frame's payload, unmasked before it is inflated.
    private var scratch: [UInt8] = []
    private var events: [Event] = []
    private var eventIndex = 0
    /// The peer's close arrived: what follows is ignored.
    package private(set) var closeReceived = false
    /// A violation was found: the engine takes no more input.
    private var failed: WebSocketError?

    // Sending.
    private var output: [UInt8] = []
    private var outputStart = 0
    /// A close frame was queued: data frames after it are dropped (RFC 6455 §5.5.1).
    package private(set) var closeSent = false
    /// The frame `appendPayload` writes: its mask and how far into it.
    private var sendingMask: (UInt8, UInt8, UInt8, UInt8)?
    private var sendingOffset: UInt64 = 0
    private var sendingRemaining: UInt64 = 0
    private var sendingDropped = false
    /// Control frames queued while a data frame's payload is half written: they follow it
    /// (a frame's bytes cannot be interrupted; fragments can).
    private var controlWaiting: [UInt8] = []
    // The compressed message being sent: its opcode, whether its first frame went out, and
    // compressed bytes not yet framed.
    private var sendingCompressed = false
    private var sendingOpcode = WebSocketOpcode.binary
    private var sentFirstFragment = false
    private var deflated: [UInt8] = []
    /// Compressed bytes per frame of a compressed message: a large message leaves as
    /// fragments while it is compressed, never gathered whole.
    package static let compressedFragmentSize = 16 * 1024

    package init(configuration: Configuration, random: ((inout [UInt8]) -> Void)? = nil) {
        self.configuration = configuration
        self.random = random ?? { bytes in
            let count = bytes.count
            // GnuTLS's nonce generator: user space, unpredictable, as masks must be.
            _ = bytes.withUnsafeMutableBytes { gnutls_rnd(GNUTLS_RND_NONCE, $0.baseAddress, count) }
        }
        head = HTTPUpgradeHeadBuffer(limit: configuration.maximumHeadSize)
    }

    /// Starts: a client queues its upgrade request; with `skipHandshake` the connection opens.
    package func start() {
        if configuration.skipHandshake {
            // No upgrade: both ends agreed beforehand, on permessage-deflate too (its settings
            // taken as the agreement).
            do {
                try open(subprotocol: nil, deflate: configuration.deflate.map(WebSocketDeflateNegotiation.Agreement.init(settings:)))
            } catch {
                failed = error
            }
        } else if configuration.role == .client {
            clientKey = WebSocketHandshake.makeKey(random: random)
            var headers = configuration.additionalHeaders
            if let deflate = configuration.deflate { headers.append((name: "Sec-WebSocket-Extensions", value: WebSocketDeflateNegotiation.offer(deflate))) }
            queue(
                WebSocketHandshake.request(
                    host: configuration.host, path: configuration.path, key: clientKey, subprotocols: configuration.subprotocols,
                    additionalHeaders: headers))
        }
    }

    private func open(subprotocol: String?, deflate: WebSocketDeflateNegotiation.Agreement? = nil) throws(WebSocketError) {
        if let deflate {
            let peer: Role = configuration.role == .client ? .server : .client
            let settings = configuration.deflate ?? WebSocketDeflateNegotiation.Settings()
            guard
                let deflater = WebSocketDeflater(
                    windowBits: deflate.windowBits(of: configuration.role), level: settings.compressionLevel, memoryLevel: settings.memoryLevel,
                    noContextTakeover: deflate.sendsWithoutContext(configuration.role)),
                let inflater = WebSocketInflater(windowBits: deflate.windowBits(of: peer))
            else { throw .handshakeFailed("zlib could not set up permessage-deflate (out of memory)") }
            self.deflater = deflater
            self.inflater = inflater
            deflateAgreement = deflate
            parser.allowsCompressedFrames = true
        }
        isOpen = true
        self.subprotocol = subprotocol
        events.append(.opened(subprotocol: subprotocol))
    }

    // MARK: Receiving

    /// Takes bytes from the peer. Throws on a violation, after queueing the close frame
    /// (or a handshake refusal) the peer is owed; then takes no more.
    package func receive(_ bytes: UnsafeRawBufferPointer) throws(WebSocketError) {
        if let failed { throw failed }
        do {
            var rest = bytes
            if pendingRequest != nil { return try refuseEarlyBytes(rest) }
            if !isOpen {
                let (taken, found) = try takeHead(bytes)
                rest = UnsafeRawBufferPointer(rebasing: bytes[taken...])
                guard let found else { return }
                try handshake(found)
                if pendingRequest != nil { return try refuseEarlyBytes(rest) }
            }
            guard !closeReceived, !rest.isEmpty else { return }
            try parser.parse(rest) { (piece) throws(WebSocketError) in try self.handle(piece) }
        } catch {
            failed = error
            if let code = error.closeCode, isOpen { close(code: code, reason: []) }
            throw error
        }
    }

    /// Gathers the peer's head; a server answers one it cannot parse, or that runs past the
    /// limit, with an error status before failing.
    private func takeHead(_ bytes: UnsafeRawBufferPointer) throws(WebSocketError) -> (taken: Int, head: HTTPUpgradeHead?) {
        do {
            return try head.take(bytes)
        } catch {
            if configuration.role == .server {
                let status = if case .handshakeTooLarge = error { "431 Request Header Fields Too Large" } else { "400 Bad Request" }
                queue(Array("HTTP/1.1 \(status)\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".utf8))
            }
            throw error
        }
    }

    private func handshake(_ found: HTTPUpgradeHead) throws(WebSocketError) {
        switch configuration.role {
        case .client:
            let answer = try WebSocketHandshake.validateResponse(found, key: clientKey, offered: configuration.subprotocols, deflate: configuration.deflate)
            if answer.deflate != nil { extensionsHeader = found.value("sec-websocket-extensions") }
            try open(subprotocol: answer.subprotocol, deflate: answer.deflate)
        case .server where configuration.applicationAnswersRequests:
            if let refusal = WebSocketHandshake.refusal(of: found) {
                queue(refusal.response)
                if let failure = refusal.failure { throw failure }
            }
            pendingRequest = found
            events.append(.requestReceived(WebSocketClientRequest(subprotocols: WebSocketHandshake.offeredSubprotocols(found), headers: found.fields)))
        case .server:
            let decision = WebSocketHandshake.answer(
                found, supported: configuration.subprotocols, additionalHeaders: configuration.additionalHeaders, deflate: configuration.deflate)
            queue(decision.response)
            if let failure = decision.failure { throw failure }
            extensionsHeader = decision.deflate?.responseValue
            try open(subprotocol: decision.subprotocol, deflate: decision.deflate)
        }
    }

    /// A client sends nothing after its request before the server's response (RFC 6455 §4.1).
    private func refuseEarlyBytes(_ bytes: UnsafeRawBufferPointer) throws(WebSocketError) {
        guard !bytes.isEmpty else { return }
        pendingRequest = nil
        let refusal = WebSocketHandshake.refuse("400 Bad Request", "the client sent bytes before the server answered its upgrade request")
        queue(refusal.response)
        throw refusal.failure ?? WebSocketError.handshakeFailed("early bytes")
    }

    /// Server: the application's answer to the request it was shown (`requestReceived`): the
    /// 101 response with its subprotocol and header fields (besides the configuration's), or a
    /// 403 refusal, which fails the connection. A subprotocol the client did not offer is
    /// answered with 500 and fails it too. Does nothing without a request waiting.
    package func respond(with answer: WebSocketRequestAnswer) throws(WebSocketError) {
        if let failed { throw failed }
        guard let request = pendingRequest else { return }
        pendingRequest = nil
        do throws(WebSocketError) {
            let headers = answer.additionalHeaders.map { "\($0.name): \($0.value)\r\n" }.joined()
            guard answer.accepted else {
                let refusal = WebSocketHandshake.refuse("403 Forbidden", "the server's application refused the upgrade request", extra: headers)
                queue(refusal.response)
                throw refusal.failure ?? WebSocketError.handshakeFailed("refused")
            }
            if let chosen = answer.subprotocol, !WebSocketHandshake.offeredSubprotocols(request).contains(chosen) {
                let refusal = WebSocketHandshake.refuse(
                    "500 Internal Server Error", "the server's application chose subprotocol \(chosen), which the client did not offer")
                queue(refusal.response)
                throw refusal.failure ?? WebSocketError.handshakeFailed("subprotocol")
            }
            let decision = WebSocketHandshake.accept(
                request, subprotocol: answer.subprotocol, additionalHeaders: configuration.additionalHeaders + answer.additionalHeaders,
                deflate: configuration.deflate)
            queue(decision.response)
            extensionsHeader = decision.deflate?.responseValue
            try open(subprotocol: decision.subprotocol, deflate: decision.deflate)
        } catch {
            failed = error
            throw error
        }
    }

    private func handle(_ piece: WebSocketFrameParser.Piece) throws(WebSocketError) {
        guard !closeReceived else { return }
        switch piece {
        case .header(let header):
            try begin(header)
        case .payload(let bytes, let offset):
            guard let header = frame, let opcode = WebSocketOpcode(rawValue: header.opcode) else { return }
            if messageCompressed && !opcode.isControl {
                try inflate(bytes, key: header.maskKey, offset: offset)
            } else if opcode.isControl {
                let start = control.count
                control.append(contentsOf: bytes)
                if let key = header.maskKey { unmask(&control, from: start, key: key, offset: UInt64(start)) }
            } else {
                let start = message.count
                message.append(contentsOf: bytes)
                if let key = header.maskKey { unmask(&message, from: start, key: key, offset: payloadOffset(of: start)) }
                if messageOpcode == .text {
                    let valid = message.withUnsafeBytes { text.feed(UnsafeRawBufferPointer(rebasing: $0[start...])) }
                    guard valid else { throw .invalidUTF8 }
                }
            }
        case .frameEnd:
            try end()
        }
    }

    /// Unmasks a compressed frame's payload piece and inflates it onto the message, bounded by
    /// the maximum message size (the inflated size is what counts).
    private func inflate(_ bytes: UnsafeRawBufferPointer, key: (UInt8, UInt8, UInt8, UInt8)?, offset: UInt64) throws(WebSocketError) {
        guard let inflater else { return }
        scratch.removeAll(keepingCapacity: scratch.capacity <= 64 * 1024)
        scratch.append(contentsOf: bytes)
        if let key { unmask(&scratch, from: 0, key: key, offset: offset) }
        let start = message.count
        var failure: WebSocketError?
        scratch.withUnsafeBytes { compressed in
            do throws(WebSocketError) {
                try inflater.inflate(compressed, into: &message, limit: configuration.maximumMessageSize)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        try checkText(from: start)
    }

    /// Feeds the message's text from `start` to the UTF-8 check.
    private func checkText(from start: Int) throws(WebSocketError) {
        guard messageOpcode == .text, start < message.count else { return }
        let valid = message.withUnsafeBytes { text.feed(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        guard valid else { throw .invalidUTF8 }
    }

    /// Where the bytes at `index` of the message buffer fall in the current frame's payload.
    private func payloadOffset(of index: Int) -> UInt64 { UInt64(index - frameStartInMessage) }

    private func unmask(_ buffer: inout [UInt8], from start: Int, key: (UInt8, UInt8, UInt8, UInt8), offset: UInt64) {
        buffer.withUnsafeMutableBytes { WebSocketFrameHeader.mask(UnsafeMutableRawBufferPointer(rebasing: $0[start...]), key: key, offset: offset) }
    }

    private func begin(_ header: WebSocketFrameHeader) throws(WebSocketError) {
        switch (configuration.role, header.maskKey) {
        case (.server, nil): throw .protocolViolation("a client sent an unmasked frame")
        case (.client, .some): throw .protocolViolation("a server sent a masked frame")
        default: break
        }
        // The parser admits only known opcodes.
        let opcode = WebSocketOpcode(rawValue: header.opcode)!
        frame = header
        if opcode.isControl {
            control.removeAll(keepingCapacity: true)
            return
        }
        let compressedBit = header.reserved & 0x4 != 0
        switch (opcode, messageOpcode) {
        case (.continuation, nil): throw .protocolViolation("a continuation frame came without a message to continue")
        case (.text, .some), (.binary, .some): throw .protocolViolation("a new message began before the previous one's final frame")
        case (.text, nil), (.binary, nil):
            messageOpcode = opcode
            text = UTF8Validator()
            messageCompressed = compressedBit
            compressedReceived = 0
        default:
            if compressedBit { throw .protocolViolation("a continuation frame set RSV1 (only a message's first frame does)") }
        }
        if messageCompressed {
            // Compressed bytes are inflated as they come and not kept; their count is bounded
            // too, so a stream of blocks that inflate to nothing cannot run on forever. The
            // bound allows the most the deflate format can grow data (fixed Huffman codes of up
            // to 9 bits per byte: 9/8), whichever encoder the peer uses.
            compressedReceived += header.length
            let maximum = UInt64(configuration.maximumMessageSize)
            guard compressedReceived <= maximum + maximum / 8 + 1024 else {
                throw .messageTooLarge(size: Int(clamping: compressedReceived), maximum: configuration.maximumMessageSize)
            }
            frameStartInMessage = message.count
            return
        }
        let size = UInt64(message.count) + header.length
        guard size <= UInt64(configuration.maximumMessageSize) else {
            throw .messageTooLarge(size: Int(clamping: size), maximum: configuration.maximumMessageSize)
        }
        frameStartInMessage = message.count
        message.reserveCapacity(Int(size))
    }

    private func end() throws(WebSocketError) {
        guard let header = frame, let opcode = WebSocketOpcode(rawValue: header.opcode) else { return }
        frame = nil
        switch opcode {
        case .ping:
            if configuration.autoReplyPing {
                // A peer that pings faster than it reads gets pongs for the pings processed
                // while it drains, not one each (RFC 6455 §5.5.3 allows answering the latest
                // only): what the engine holds for it stays bounded.
                if !closeSent && pendingOutputCount + controlWaiting.count < Self.pongBacklogLimit { control.withUnsafeBytes { queueFrame(.pong, $0) } }
            } else {
                events.append(.message(.ping, control))
            }
        case .pong:
            events.append(.message(.pong, control))
        case .close:
            try checkClose(control)
            closeReceived = true
            // Answered with the peer's code (RFC 6455 §5.5.1), unless a close was sent already.
            if !closeSent {
                closeSent = true
                Array(control.prefix(2)).withUnsafeBytes { queueFrame(.close, $0) }
            }
            events.append(.message(.close, control))
        case .text, .binary, .continuation:
            guard header.fin, let whole = messageOpcode else { return }
            if messageCompressed, let inflater, let deflateAgreement {
                let start = message.count
                let peer: Role = configuration.role == .client ? .server : .client
                try inflater.finishMessage(into: &message, limit: configuration.maximumMessageSize, reset: deflateAgreement.sendsWithoutContext(peer))
                try checkText(from: start)
                messageCompressed = false
            }
            if whole == .text && !text.isComplete { throw .invalidUTF8 }
            events.append(.message(whole, message))
            message = []
            messageOpcode = nil
        }
    }

    /// A close frame's payload: empty, or a code a peer may send and a UTF-8 reason.
    private func checkClose(_ payload: [UInt8]) throws(WebSocketError) {
        guard !payload.isEmpty else { return }
        guard payload.count >= 2 else { throw .protocolViolation("a close frame carried one byte") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard Self.isValidReceivedCloseCode(code) else { throw .protocolViolation("a close frame carried code \(code), which may not be sent") }
        let valid = payload.withUnsafeBytes { UTF8Validator.isValid(UnsafeRawBufferPointer(rebasing: $0[2...])) }
        guard valid else { throw .invalidUTF8 }
    }

    /// Codes a peer may put in a close frame (RFC 6455 §7.4): the defined ones it may send,
    /// and the registered and private ranges.
    package static func isValidReceivedCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    /// The next event; nil when none is waiting.
    package func pollEvent() -> Event? {
        guard eventIndex < events.count else {
            if eventIndex > 0 {
                events.removeAll(keepingCapacity: true)
                eventIndex = 0
            }
            return nil
        }
        defer { eventIndex += 1 }
        return events[eventIndex]
    }

    // MARK: Sending

    /// Queues one whole frame of `opcode` with `payload` (a control frame's at most 125
    /// bytes); a data message is compressed when permessage-deflate was agreed. Data after a
    /// close is dropped.
    package func send(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer) throws(WebSocketError) {
        if opcode.isControl && payload.count > 125 { throw .controlFrameTooLarge(payload.count) }
        if opcode == .close {
            guard !closeSent else { return }
            closeSent = true
        } else if closeSent {
            return
        }
        if opcode.isControl {
            queueFrame(opcode, payload)
        } else {
            try beginFrame(opcode, length: payload.count)
            appendPayload(payload)
        }
    }

    /// Queues a close frame with `code` and `reason` (once; later closes are dropped).
    package func close(code: UInt16?, reason: [UInt8]) {
        guard !closeSent else { return }
        closeSent = true
        var payload: [UInt8] = []
        if let code { payload = [UInt8(code >> 8), UInt8(code & 0xFF)] + reason.prefix(123) }
        payload.withUnsafeBytes { queueFrame(.close, $0) }
    }

    /// Starts a frame of `length` bytes whose payload `appendPayload` then writes in pieces,
    /// so a large message is framed without gathering it first. A control frame's whole
    /// payload must come before the next `beginFrame`. With permessage-deflate agreed, a whole
    /// data message (`fin`) is compressed as its payload comes and leaves as fragments of
    /// `compressedFragmentSize` compressed bytes.
    package func beginFrame(_ opcode: WebSocketOpcode, fin: Bool = true, length: Int) throws(WebSocketError) {
        if opcode.isControl && length > 125 { throw .controlFrameTooLarge(length) }
        sendingDropped = closeSent
        if opcode == .close { closeSent = true }
        sendingRemaining = UInt64(length)
        sendingOffset = 0
        sendingCompressed = false
        guard !sendingDropped else { return }
        if deflater != nil, fin, opcode == .text || opcode == .binary {
            sendingCompressed = true
            sendingOpcode = opcode
            sentFirstFragment = false
            if length == 0 { finishCompressedMessage() }
            return
        }
        sendingMask = configuration.role == .client ? newMask() : nil
        WebSocketFrameHeader(fin: fin, opcode: opcode.rawValue, maskKey: sendingMask, length: UInt64(length)).write(into: &output)
        if length == 0 { flushControlWaiting() }
    }

    /// Payload bytes of the frame `beginFrame` started (masked as they are queued).
    package func appendPayload(_ bytes: UnsafeRawBufferPointer) {
        let count = min(bytes.count, Int(sendingRemaining))
        sendingRemaining -= UInt64(count)
        guard !sendingDropped else { return }
        let piece = UnsafeRawBufferPointer(rebasing: bytes[..<count])
        if sendingCompressed {
            deflater?.compress(piece, into: &deflated)
            while deflated.count >= Self.compressedFragmentSize { queueCompressedFragment(count: Self.compressedFragmentSize, fin: false) }
            if sendingRemaining == 0 { finishCompressedMessage() }
            return
        }
        let start = output.count
        output.append(contentsOf: piece)
        if let key = sendingMask { unmask(&output, from: start, key: key, offset: sendingOffset) }
        sendingOffset += UInt64(count)
        if sendingRemaining == 0 { flushControlWaiting() }
    }

    /// Payload bytes the current frame still expects.
    package var framePayloadRemaining: Int { Int(sendingRemaining) }

    private func finishCompressedMessage() {
        deflater?.finishMessage(into: &deflated)
        queueCompressedFragment(count: deflated.count, fin: true)
        sendingCompressed = false
    }

    /// One frame of the compressed message: RSV1 and the opcode on the first, continuation
    /// after. Dropped once a close went out (the engine's own, after a violation).
    private func queueCompressedFragment(count: Int, fin: Bool) {
        defer { deflated.removeFirst(count) }
        guard !closeSent else { return }
        let mask = configuration.role == .client ? newMask() : nil
        WebSocketFrameHeader(
            fin: fin, reserved: sentFirstFragment ? 0 : 0x4, opcode: sentFirstFragment ? WebSocketOpcode.continuation.rawValue : sendingOpcode.rawValue,
            maskKey: mask, length: UInt64(count)
        ).write(into: &output)
        sentFirstFragment = true
        let start = output.count
        output.append(contentsOf: deflated[..<count])
        if let mask { unmask(&output, from: start, key: mask, offset: 0) }
    }

    /// A data frame's payload is half written: a control frame waits for its end.
    private var midFrame: Bool { sendingRemaining > 0 && !sendingDropped && !sendingCompressed }

    private func flushControlWaiting() {
        guard !controlWaiting.isEmpty else { return }
        output.append(contentsOf: controlWaiting)
        controlWaiting.removeAll(keepingCapacity: controlWaiting.capacity <= 4096)
    }

    private func queueFrame(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer) {
        let mask = configuration.role == .client ? newMask() : nil
        let waits = midFrame
        var frame: [UInt8] = []
        WebSocketFrameHeader(fin: true, opcode: opcode.rawValue, maskKey: mask, length: UInt64(payload.count)).write(into: &frame)
        let start = frame.count
        frame.append(contentsOf: payload)
        if let mask { unmask(&frame, from: start, key: mask, offset: 0) }
        if waits { controlWaiting.append(contentsOf: frame) } else { output.append(contentsOf: frame) }
    }

    private func newMask() -> (UInt8, UInt8, UInt8, UInt8) {
        var bytes = [UInt8](repeating: 0, count: 4)
        random(&bytes)
        return (bytes[0], bytes[1], bytes[2], bytes[3])
    }

    private func queue(_ bytes: [UInt8]) {
        output.append(contentsOf: bytes)
    }

    /// Bytes waiting to be written to the peer.
    package var pendingOutputCount: Int { output.count - outputStart }

    /// Lends the pending output: `body` returns how many bytes it took, which are dropped.
    package func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        guard pendingOutputCount > 0 else { return 0 }
        let taken = try output.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[outputStart...])) }
        outputStart += taken
        if outputStart == output.count {
            output.removeAll(keepingCapacity: output.capacity <= 256 * 1024)
            outputStart = 0
        } else if outputStart >= 64 * 1024 {
            output.removeFirst(outputStart)
            outputStart = 0
        }
        return taken
    }
}
