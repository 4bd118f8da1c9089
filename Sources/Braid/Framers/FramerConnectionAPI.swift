import BraidIO
import Foundation

extension NetworkConnection {
    /// The framer connection's message end and its table of messages in transit.
    private var framerEnd: MessageEnd {
        get throws {
            guard let framedEnd else { throw NetworkError.internalError("a framer connection without a message receiver") }
            return framedEnd
        }
    }

    /// Queues one message for the connection's framer at once if it has room (nil), else
    /// returns its record for `sendFramerRecord`: a TLV record whose type is the message's
    /// number in the connection's table.
    func queueFramerMessage(_ content: some Collection<UInt8>, message: NWProtocolFramer.Message?, isComplete: Bool = true) throws -> StreamBytes? {
        let end = try framerEnd
        var type = end.receiver.framerMessages.registerOutbound(message)
        if !isComplete { type |= FramerMessages.incompleteBit }
        return try end.queueAtOnce(content, type: type, queued: start)
    }

    /// Sends a record `queueFramerMessage` could not queue at once.
    func sendFramerRecord(_ bytes: StreamBytes) async throws {
        try await framerEnd.end.sendWaiting(bytes, endOfStream: false, idempotent: false, queued: start)
    }

    /// Sends one message for the framer; with `lastMessage`, the stream ends after it.
    func sendFramerMessage(_ content: some Collection<UInt8>, message: NWProtocolFramer.Message?, lastMessage: Bool, isComplete: Bool = true) async throws {
        if let part = shared.datagram {
            // Over UDP: one datagram's worth, numbered as a record is (UDP has no end to send).
            var type = part.framerMessages.registerOutbound(message)
            if !isComplete { type |= FramerMessages.incompleteBit }
            var record = Data(TLVEncoder.header(type: type, length: UInt32(clamping: content.count)))
            record.append(contentsOf: content)
            try await sendDatagram(record)
            return
        }
        if lastMessage {
            let end = try framerEnd
            let type = end.receiver.framerMessages.registerOutbound(message)
            try await end.send(framed: MessageEnd.frame(content, type: type), endOfStream: true, queued: start)
            return
        }
        guard let bytes = try queueFramerMessage(content, message: message) else { return }
        try await sendFramerRecord(bytes)
    }

    /// A record the framer layer delivered, as its content and the framer's message (an empty
    /// one of `definition` if the framer delivered none).
    func framerMessage(_ record: TLVMessage, definition: NWProtocolFramer.Definition) -> (content: Data, message: NWProtocolFramer.Message) {
        let message = framedEnd?.receiver.framerMessages.takeInbound(record.type) ?? NWProtocolFramer.Message(definition: definition)
        return (record.value, message)
    }

    /// The next message the framer delivered.
    func receiveFramerMessage(definition: NWProtocolFramer.Definition) async throws -> (content: Data, message: NWProtocolFramer.Message) {
        if let part = shared.datagram {
            // Over UDP: each datagram the channel passes up is one record the framer delivered.
            let (record, _) = try await receiveDatagram()
            guard record.count >= TLVFraming.headerSize else { throw NetworkError.internalError("a framer's record of \(record.count) bytes") }
            let type = record.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let message = part.framerMessages.takeInbound(type) ?? NWProtocolFramer.Message(definition: definition)
            return (Data(record.dropFirst(TLVFraming.headerSize)), message)
        }
        let end = try framerEnd
        start()
        if let record = try end.decoded() { return framerMessage(record, definition: definition) }
        guard let record = try await end.receive() else { throw MessageEnd.endedBetweenMessages }
        return framerMessage(record, definition: definition)
    }
}

extension NetworkConnection {
    /// Sends `content` as one message: the framer's `handleOutput` gets it whole, with
    /// `metadata` (an empty message of the framer when nil). With `lastMessage`, the stream
    /// ends after it. Starts the connection if needed; messages from concurrent senders never
    /// interleave.
    ///
    /// ```swift
    /// let greeting = NWProtocolFramer.Message(definition: LinesFramer.definition)
    /// greeting["kind"] = "greeting"
    /// try await lines.send(Data("hello".utf8), metadata: greeting)
    /// ```
    public func send<T>(
        _ content: Data, lastMessage: Bool = false, metadata: NWProtocolFramer.Message? = nil,
        @ProtocolMetadataBuilder other builder: () -> [NWProtocolMetadata] = { [] }
    ) async throws where ApplicationProtocol == Framer<T> {
        try await sendFramerMessage(content, message: metadata, lastMessage: lastMessage)
    }

    /// The next message the framer delivered, with the framer's message (`metadata.framer`).
    /// Throws `NetworkError.unexpectedEndOfStream` once the peer has finished, and the
    /// connection's failure (a framer that failed it, or a message over the maximum size).
    ///
    /// ```swift
    /// let (content, metadata) = try await lines.receive()
    /// print(metadata.framer["kind"] as? String ?? "-", content.count)
    /// ```
    public func receive<T>() async throws -> (content: Data, metadata: Framer<T>.Metadata) where ApplicationProtocol == Framer<T> {
        let (content, message) = try await receiveFramerMessage(definition: T.definition)
        return (content, Framer<T>.Metadata(framer: message))
    }
}
