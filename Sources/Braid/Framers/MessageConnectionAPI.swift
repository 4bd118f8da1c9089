import BraidIO
import Foundation

/// Whole messages received on a framed connection (`TLV`, `Coder`), one per iteration, until
/// the peer finishes the stream at a message boundary; errors are thrown by the iteration.
public struct NetworkMessages<Element>: AsyncSequence {
    /// One iteration's source of messages. `poll` hands out a message that is already here
    /// without suspending (nil: none is); `receive` waits for the next one (nil: the end). A
    /// burst of messages is taken through `poll`, so each costs a lock round rather than a
    /// chain of suspendable calls.
    @usableFromInline
    struct Source {
        @usableFromInline var poll: () throws -> Element? = { nil }
        @usableFromInline let receive: () async throws -> Element?
    }

    /// Makes each iterator's source: the same functions for a byte stream's messages; for a
    /// UDP connection's, a `receive` that takes every datagram queued at once into the
    /// iterator and a `poll` that hands them out from there.
    let makeSource: @Sendable () -> Source

    init(poll: @escaping @Sendable () throws -> Element?, receive: @escaping @Sendable () async throws -> Element?) {
        makeSource = { Source(poll: poll, receive: receive) }
    }

    init(makingSource: @escaping @Sendable () -> Source) {
        self.makeSource = makingSource
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        @usableFromInline let source: Source
        @usableFromInline var finished = false

        @usableFromInline init(source: Source) { self.source = source }

        // Inlinable: specialized in the caller for its `Element` (for `UDP()`, a tuple whose
        // metadata the unspecialized code looked up for every datagram).
        @inlinable
        public mutating func next() async throws -> Element? {
            guard !finished else { return nil }
            do {
                if let element = try source.poll() { return element }
                let element = try await source.receive()
                if element == nil { finished = true }
                return element
            } catch {
                finished = true
                throw error
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: makeSource()) }
}

extension NetworkConnection {
    /// The connection's messages: its byte stream, framed (nil without a message receiver). A
    /// peer that breaks the framing fails the connection.
    static func framedEnd(shared: ConnectionShared, core: LoopBound<ConnectionCore>) -> MessageEnd? {
        guard let part = shared.byteStream, let receiver = part.messageReceiver else { return nil }
        return MessageEnd(end: part.end, receiver: receiver) { error in
            // The stream has lost its message boundaries: end the connection with the error.
            core.loop.execute { context in core.value.failByteStream(error, context: context) }
        }
    }

    /// `MessageEnd.queueAtOnce` on the connection's own end, outside the async call: in the
    /// async function the end was copied into its frame (a reference count per part, per send).
    fileprivate func queueMessageAtOnce(_ content: some Collection<UInt8>, type: UInt32) throws -> StreamBytes? {
        // Called through the optional in place: `guard let` copied it. `queued` is a closure
        // literal: `start` alone, a partial application, allocated a context per send.
        guard framedEnd != nil else { throw NetworkError.internalError("a framed connection without a message receiver") }
        return try framedEnd?.queueAtOnce(content, type: type, queued: { start() }) ?? nil
    }

    fileprivate var messageEnd: MessageEnd {
        get throws {
            guard let framedEnd else { throw NetworkError.internalError("a framed connection without a message receiver") }
            return framedEnd
        }
    }
}

extension NetworkConnection where ApplicationProtocol == TLV {
    /// Sends `content` as one message of `type` (e.g. an enum's raw value). Starts the
    /// connection if needed. Messages from concurrent senders never interleave.
    ///
    /// ```swift
    /// try await connection.send(Data("e2e4".utf8), type: 2)
    /// ```
    // Inlinable, so that the caller's `Data` or array reaches `queueContiguousMessage` as plain
    // memory: called generically, every send looked up the caller's collection type at run
    // time (for its count, its storage and the copy), which cost more than the copy itself.
    @inlinable
    public func send(_ content: some Collection<UInt8>, type: Int) async throws {
        let queued = try content.withContiguousStorageIfAvailable { try queueContiguousMessage(UnsafeRawBufferPointer($0), type: type) }
        if queued == true { return }
        try await sendMessage(content, type: type)
    }

    /// Queues one small message whose value is in contiguous memory (copied into the block
    /// small sends share) if the stream has room now: true when queued; false for a larger
    /// message, or one that must wait, which `sendMessage` then sends.
    @usableFromInline
    func queueContiguousMessage(_ content: UnsafeRawBufferPointer, type: Int) throws -> Bool {
        guard framedEnd != nil else { throw NetworkError.internalError("a framed connection without a message receiver") }
        return try framedEnd?.queueSmallAtOnce(content, type: try MessageEnd.wireType(type), queued: { start() }) ?? false
    }

    /// `send(_:type:)` for content that is not contiguous, or that must wait for room.
    @usableFromInline
    func sendMessage(_ content: some Collection<UInt8>, type: Int) async throws {
        guard let bytes = try queueMessageAtOnce(content, type: try MessageEnd.wireType(type)) else { return }
        try await messageEnd.end.sendWaiting(bytes, endOfStream: false, idempotent: false, queued: { start() })
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
        let end = try messageEnd
        start()
        return try await end.receiveTLV()
    }

    /// Every message received, in order, until the peer finishes the stream.
    ///
    /// ```swift
    /// for try await (content, metadata) in connection.messages {
    ///     print("type \(metadata.type): \(content.count) bytes")
    /// }
    /// ```
    public var messages: NetworkMessages<(content: Data, metadata: TLV.Metadata)> {
        // Made once per iteration, not once per message.
        let end = Result { try messageEnd }
        return NetworkMessages(poll: { try end.get().decodedTLV() }) { [self] in
            let framed = try end.get()
            start()
            return try await framed.nextTLV()
        }
    }
}

extension NetworkConnection where ApplicationProtocol: CoderProtocol {
    /// Encodes `value` with the stack's coder and sends it as one message (over UDP: one
    /// datagram). Throws `NetworkError.messageEncodingFailed` if the coder cannot encode it,
    /// and over UDP `datagramTooLarge` if it encodes larger than a datagram carries.
    ///
    /// ```swift
    /// try await typed.send("hello")
    /// ```
    public func send(_ value: ApplicationProtocol.Sending) async throws {
        if isOverUDP {
            try await sendDatagram(MessageEnd.encode(value, using: stack.coder))
        } else {
            guard let bytes = try queueMessageAtOnce(MessageEnd.encode(value, using: stack.coder), type: CoderFraming.messageType)
            else { return }
            try await messageEnd.end.sendWaiting(bytes, endOfStream: false, idempotent: false, queued: start)
        }
    }

    /// The next value, decoded from one whole message (over UDP: one datagram;
    /// `metadata.type` is `CoderFraming.messageType`). A message that does not decode throws
    /// `NetworkError.messageDecodingFailed` and is consumed: the connection stays usable and
    /// the next `receive()` returns the next value.
    ///
    /// ```swift
    /// let message = try await typed.receive().content
    /// ```
    public func receive() async throws -> (content: ApplicationProtocol.Receiving, metadata: TLV.Metadata) {
        if isOverUDP { return try await value(from: receiveDatagram().content) }
        let end = try messageEnd
        start()
        return try await end.receiveValue(ApplicationProtocol.Receiving.self, using: stack.coder)
    }

    /// Every value received, in order, until the peer finishes the stream (over UDP: until the
    /// connection is cancelled). A message that does not decode ends the iteration with
    /// `NetworkError.messageDecodingFailed` (the connection stays usable: a new iteration, or
    /// `receive()`, goes on with the next message).
    public var messages: NetworkMessages<(content: ApplicationProtocol.Receiving, metadata: TLV.Metadata)> {
        if isOverUDP {
            return NetworkMessages(makingSource: { [self] in
                let datagrams = datagramSource()
                return .init(
                    poll: { try datagrams.poll().map { try self.value(from: $0.content) } },
                    receive: { try await datagrams.receive().map { try self.value(from: $0.content) } })
            })
        }
        // Made once per iteration, not once per message.
        let end = Result { try messageEnd }, coder = stack.coder
        return NetworkMessages(poll: { try end.get().decodedValue(ApplicationProtocol.Receiving.self, using: coder) }) { [self] in
            let framed = try end.get()
            start()
            return try await framed.nextValue(ApplicationProtocol.Receiving.self, using: coder)
        }
    }

    /// `Coder` over UDP: one value per datagram, on a UDP connection (else: TLV messages on a
    /// byte stream).
    private var isOverUDP: Bool { (stack as? any MessageFramedStack)?.framedLower.udp != nil }

    /// The value one received datagram carries (`Coder` over UDP): `messageTooLarge` beyond
    /// `maximumMessageSize` (the datagram is dropped, the connection goes on), else decoded as
    /// a stream's message value is.
    private func value(from datagram: Data) throws -> (content: ApplicationProtocol.Receiving, metadata: TLV.Metadata) {
        let maximum = (stack as? any MessageFramedStack)?.maximumMessageSize ?? TLVFraming.defaultMaximumMessageSize
        guard datagram.count <= maximum else { throw NetworkError.messageTooLarge(size: datagram.count, maximum: maximum) }
        return (try MessageEnd.decode(ApplicationProtocol.Receiving.self, from: datagram, using: stack.coder), TLV.Metadata(wire: CoderFraming.messageType))
    }
}
