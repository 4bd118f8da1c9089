import BraidIO
import BraidQUICIO
import Foundation

extension QUIC.Stream {
    /// The stream's messages, for sending or for receiving (checked against its
    /// directionality). A peer that breaks the framing ends this stream, not the connection:
    /// RESET_STREAM and STOP_SENDING with `QUICStream.messageTooLargeErrorCode`.
    fileprivate func messageEnd(sending: Bool) throws -> MessageEnd {
        let end = try sending ? writableEnd() : readableEnd()
        guard let receiver = messageReceiver else { throw NetworkError.internalError("a framed QUIC stream without a message receiver") }
        let bound = bound, inbox = self.end.inbox, outbox = self.end.outbox
        return MessageEnd(end: end, receiver: receiver) { error in
            // Every later call fails at once, so none can queue bytes on the stream meanwhile.
            inbox.fail(error)
            outbox.fail(error)
            bound.loop.execute { context in
                bound.value.abort(code: QUICStream.messageTooLargeErrorCode, error: error, context: context)
            }
        }
    }
}

extension QUIC.Stream where ApplicationProtocol == TLV {
    /// Sends `content` as one message of `type`; with `endOfStream`, finishes the stream (FIN)
    /// after it. Messages from concurrent senders never interleave.
    ///
    /// ```swift
    /// let stream = try await connection.openStream { quicStream in TLV { quicStream } }
    /// try await stream.send(Data("e2e4".utf8), type: 2)
    /// try await stream.send(Data("resign".utf8), type: 3, endOfStream: true)
    /// ```
    public func send(_ content: some Collection<UInt8>, type: Int, endOfStream: Bool = false) async throws {
        try await messageEnd(sending: true).send(content, type: try MessageEnd.wireType(type), endOfStream: endOfStream)
    }

    /// The next whole message and its type, as on a `TLV` connection. When the peer announces
    /// more than `TLV.maximumMessageSize` it throws `NetworkError.messageTooLarge` and this
    /// stream ends (reset and stopped with `QUICStream.messageTooLargeErrorCode`; its later
    /// calls throw the same error); throws `unexpectedEndOfStream` once the peer has finished.
    ///
    /// ```swift
    /// let (content, metadata) = try await stream.receive()
    /// print("type \(metadata.type): \(content.count) bytes")
    /// ```
    public func receive() async throws -> (content: Data, metadata: TLV.Metadata) {
        try await messageEnd(sending: false).receiveTLV()
    }

    /// Every message received, in order, until the peer finishes the stream.
    ///
    /// ```swift
    /// for try await (content, metadata) in stream.messages {
    ///     try await stream.send(content, type: metadata.type)
    /// }
    /// ```
    public var messages: NetworkMessages<(content: Data, metadata: TLV.Metadata)> {
        // Made once per iteration, not once per message.
        let end = Result { try messageEnd(sending: false) }
        return NetworkMessages(poll: { try end.get().decodedTLV() }) { try await end.get().nextTLV() }
    }
}

extension QUIC.Stream where ApplicationProtocol: CoderProtocol {
    /// Encodes `value` with the stack's coder and sends it as one message; with
    /// `endOfStream`, finishes the stream (FIN) after it. Throws
    /// `NetworkError.messageEncodingFailed` if the coder cannot encode it.
    ///
    /// ```swift
    /// let stream = try await connection.openStream { quicStream in
    ///     Coder(String.self, using: .json) { quicStream }
    /// }
    /// try await stream.send("hello", endOfStream: true)
    /// ```
    public func send(_ value: ApplicationProtocol.Sending, endOfStream: Bool = false) async throws {
        try await messageEnd(sending: true).send(value: value, using: stack.coder, endOfStream: endOfStream)
    }

    /// The next value, decoded from one whole message, as on a `Coder` connection. A message
    /// that does not decode throws `NetworkError.messageDecodingFailed` and is consumed (the
    /// stream goes on); a message over the maximum ends the stream as for `TLV`.
    ///
    /// ```swift
    /// let reply = try await stream.receive().content
    /// ```
    public func receive() async throws -> (content: ApplicationProtocol.Receiving, metadata: TLV.Metadata) {
        try await messageEnd(sending: false).receiveValue(ApplicationProtocol.Receiving.self, using: stack.coder)
    }

    /// Every value received, in order, until the peer finishes the stream. A message that does
    /// not decode ends the iteration with `NetworkError.messageDecodingFailed` (the stream
    /// stays usable).
    public var messages: NetworkMessages<(content: ApplicationProtocol.Receiving, metadata: TLV.Metadata)> {
        let end = Result { try messageEnd(sending: false) }, coder = stack.coder
        return NetworkMessages(poll: { try end.get().decodedValue(ApplicationProtocol.Receiving.self, using: coder) }) {
            try await end.get().nextValue(ApplicationProtocol.Receiving.self, using: coder)
        }
    }
}
