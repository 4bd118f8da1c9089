import BraidIO
import Foundation

/// Whole messages received on a framed connection (`TLV`, `Coder`), one per iteration, until
/// the peer finishes the stream at a message boundary; errors are thrown by the iteration.
public struct NetworkMessages<Element>: AsyncSequence {
    let receive: @Sendable () async throws -> Element?

    public struct AsyncIterator: AsyncIteratorProtocol {
        let receive: @Sendable () async throws -> Element?
        var finished = false

        public mutating func next() async throws -> Element? {
            guard !finished else { return nil }
            do {
                let element = try await receive()
                if element == nil { finished = true }
                return element
            } catch {
                finished = true
                throw error
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(receive: receive) }
}

extension NetworkConnection {
    /// Sends one TLV message: header and value in one piece, so messages from concurrent
    /// senders never interleave.
    fileprivate func sendMessage(_ content: some Collection<UInt8>, type: UInt32) async throws {
        guard let end = shared.byteStream else { throw NetworkError.internalError("a framed connection without a byte stream") }
        let count = content.count
        guard let length = UInt32(exactly: count) else {
            throw NetworkError.messageTooLarge(size: count, maximum: TLVFraming.largestEncodableSize)
        }
        let bytes = StreamBytes(count: TLVFraming.headerSize + count) { buffer in
            TLVEncoder.writeHeader(type: type, length: length, into: buffer)
            let value = UnsafeMutableRawBufferPointer(rebasing: buffer[TLVFraming.headerSize...])
            let copied: Void? = content.withContiguousStorageIfAvailable { value.copyMemory(from: UnsafeRawBufferPointer($0)) }
            if copied == nil {
                for (index, byte) in content.enumerated() { value[index] = byte }
            }
        }
        try await end.send(bytes, endOfStream: false, idempotent: false, queued: start)
    }

    /// The next whole TLV message; nil once the peer finished at a message boundary.
    fileprivate func receiveMessage() async throws -> TLVMessage? {
        guard let end = shared.byteStream, let receiver = shared.messageReceiver else {
            throw NetworkError.internalError("a framed connection without a message receiver")
        }
        start()
        let core = core, loop = loop
        return try await receiver.receive(from: end) { error in
            // The stream has lost its message boundaries: end the connection with the error.
            loop.execute { context in core.value.failByteStream(error, context: context) }
        }
    }

    /// The end of the stream, as a receive reports it.
    fileprivate static var endedBetweenMessages: NetworkError {
        .unexpectedEndOfStream(received: 0, wanted: TLVFraming.headerSize)
    }
}

extension NetworkConnection where ApplicationProtocol == TLV {
    /// Sends `content` as one message of `type` (e.g. an enum's raw value). Starts the
    /// connection if needed. Messages from concurrent senders never interleave.
    ///
    /// ```swift
    /// try await connection.send(Data("e2e4".utf8), type: 2)
    /// ```
    public func send(_ content: some Collection<UInt8>, type: UInt32) async throws {
        try await sendMessage(content, type: type)
    }

    /// The next whole message and its type. Concurrent receives each get a different whole
    /// message, in stream order. Throws `NetworkError.messageTooLarge` (and the connection
    /// fails) when the peer announces more than `TLV.maximumMessageSize`, and
    /// `unexpectedEndOfStream` once the peer has finished.
    ///
    /// ```swift
    /// let (content, metadata) = try await connection.receive()
    /// print("type \(metadata.type): \(content.count) bytes")
    /// ```
    public func receive() async throws -> (content: Data, metadata: TLV.Metadata) {
        guard let message = try await receiveMessage() else { throw Self.endedBetweenMessages }
        return (message.value, TLV.Metadata(type: message.type))
    }

    /// Every message received, in order, until the peer finishes the stream.
    ///
    /// ```swift
    /// for try await (content, metadata) in connection.messages {
    ///     print("type \(metadata.type): \(content.count) bytes")
    /// }
    /// ```
    public var messages: NetworkMessages<(content: Data, metadata: TLV.Metadata)> {
        NetworkMessages { [self] in
            try await receiveMessage().map { ($0.value, TLV.Metadata(type: $0.type)) }
        }
    }
}

extension NetworkConnection where ApplicationProtocol: CoderProtocol {
    /// Encodes `value` with the stack's coder and sends it as one message. Throws
    /// `NetworkError.messageEncodingFailed` if the coder cannot encode it.
    ///
    /// ```swift
    /// try await typed.send("hello")
    /// ```
    public func send(_ value: ApplicationProtocol.Sending) async throws {
        let data: Data
        do {
            data = try CoderFraming.encode(value, using: stack.coder)
        } catch {
            throw NetworkError(error)
        }
        try await sendMessage(data, type: CoderFraming.messageType)
    }

    /// The next value, decoded from one whole message (`metadata.type` is
    /// `CoderFraming.messageType`). A message that does not decode throws
    /// `NetworkError.messageDecodingFailed` and is consumed: the connection stays usable and
    /// the next `receive()` returns the next value.
    ///
    /// ```swift
    /// let message = try await typed.receive().content
    /// ```
    public func receive() async throws -> (content: ApplicationProtocol.Receiving, metadata: TLV.Metadata) {
        guard let message = try await receiveMessage() else { throw Self.endedBetweenMessages }
        return (try decode(message), TLV.Metadata(type: message.type))
    }

    /// Every value received, in order, until the peer finishes the stream. A message that does
    /// not decode ends the iteration with `NetworkError.messageDecodingFailed` (the connection
    /// stays usable: a new iteration, or `receive()`, goes on with the next message).
    public var messages: NetworkMessages<(content: ApplicationProtocol.Receiving, metadata: TLV.Metadata)> {
        NetworkMessages { [self] in
            guard let message = try await receiveMessage() else { return nil }
            return (try decode(message), TLV.Metadata(type: message.type))
        }
    }

    private func decode(_ message: TLVMessage) throws -> ApplicationProtocol.Receiving {
        do {
            return try CoderFraming.decode(ApplicationProtocol.Receiving.self, from: message, using: stack.coder)
        } catch {
            throw NetworkError(error)
        }
    }
}
