import BraidIO
import Foundation

/// The message side of one framed byte stream (`TLV`, `Coder`): a TLS or TCP connection's, or
/// a QUIC stream's. (`Coder` over UDP has no byte stream: it encodes and decodes with
/// `encode` and `decode` here, one value per datagram.) `NetworkConnection` and `QUIC.Stream` both send and receive messages
/// through this one piece of code (and its one `MessageReceiver`); they differ only in what
/// happens when the peer breaks the framing.
struct MessageEnd: Sendable {
    let end: ByteStreamEnd
    let receiver: MessageReceiver
    /// Runs when the peer announces a message larger than the maximum, so the stream has lost
    /// its message boundaries: a connection fails, a QUIC stream is reset and stopped.
    let lostBoundaries: @Sendable (NetworkError) -> Void

    /// Sends one TLV message: header and value in one piece, so messages from concurrent
    /// senders never interleave; with `endOfStream`, the stream ends after it. `queued` runs
    /// once the bytes are queued (see `ByteStreamEnd`).
    func send(_ content: some Collection<UInt8>, type: UInt32, endOfStream: Bool = false, queued: () -> Void = {}) async throws {
        try await send(framed: Self.frame(content, type: type), endOfStream: endOfStream, queued: queued)
    }

    /// Sends a message `frame` made. Not generic, so the part of a send that suspends is
    /// compiled once, without the caller's collection type to look up at run time.
    func send(framed bytes: StreamBytes, endOfStream: Bool = false, queued: () -> Void = {}) async throws {
        try await end.send(bytes, endOfStream: endOfStream, idempotent: false, queued: queued)
    }

    /// One TLV message's bytes: header then `content`. Throws `messageTooLarge` for a value
    /// a UInt32 length cannot say.
    /// A message type as the wire's 32-bit type field carries it; throws for one outside it.
    static func wireType(_ type: Int) throws -> UInt32 {
        guard let wire = UInt32(exactly: type) else { throw NetworkError.messageTypeOutOfRange(type: type) }
        return wire
    }

    static func frame(_ content: some Collection<UInt8>, type: UInt32) throws -> StreamBytes {
        let length = try length(of: content)
        return StreamBytes(count: TLVFraming.headerSize + Int(length)) { TLVEncoder.write(content, type: type, length: length, into: $0) }
    }

    /// Queues one message if the stream has room now (nil: queued; a small one is copied
    /// into the block earlier small sends fill), else its framed bytes for `sendWaiting`.
    /// TLS and TCP only: a QUIC stream's sends are charged to a budget first.
    func queueAtOnce(_ content: some Collection<UInt8>, type: UInt32, queued: () -> Void) throws -> StreamBytes? {
        let length = try Self.length(of: content)
        let count = TLVFraming.headerSize + Int(length)
        if count <= StreamOutbox.largestSharedSend,
            try end.queueAtOnce(count: count, endOfStream: false, queued: queued, writing: { TLVEncoder.write(content, type: type, length: length, into: $0) }) {
            return nil
        }
        let bytes = try Self.frame(content, type: type)
        return try end.queueAtOnce(bytes, endOfStream: false, idempotent: false, queued: queued) ? nil : bytes
    }

    /// Queues one message of at most `StreamOutbox.largestSharedSend` bytes, copied into the
    /// block earlier small sends fill, if the stream has room now: true when queued; false
    /// for a larger one or one that must wait (the caller sends it through `queueAtOnce`).
    func queueSmallAtOnce(_ content: UnsafeRawBufferPointer, type: UInt32, queued: () -> Void) throws -> Bool {
        let length = try Self.length(of: content)
        let count = TLVFraming.headerSize + Int(length)
        guard count <= StreamOutbox.largestSharedSend else { return false }
        return try end.queueAtOnce(count: count, endOfStream: false, queued: queued) { TLVEncoder.write(content, type: type, length: length, into: $0) }
    }

    /// The length field for `content`, or `messageTooLarge`.
    private static func length(of content: some Collection<UInt8>) throws -> UInt32 {
        let count = content.count
        guard let length = UInt32(exactly: count) else {
            throw NetworkError.messageTooLarge(size: count, maximum: TLVFraming.largestEncodableSize)
        }
        return length
    }

    /// The next whole TLV message; nil once the peer finished at a message boundary.
    /// `sharingStorage`: for a message decoded at once and dropped (`TLVDecoder.next(sharingStorage:)`).
    func receive(sharingStorage: Bool = false) async throws -> TLVMessage? {
        try await receiver.receive(from: end, sharingStorage: sharingStorage, tooLarge: lostBoundaries)
    }

    /// A message already decoded, taken without suspending; nil if the next one needs a
    /// `receive()` (which may wait for bytes).
    func decoded(sharingStorage: Bool = false) throws -> TLVMessage? {
        try receiver.decodedMessage(from: end, sharingStorage: sharingStorage, tooLarge: lostBoundaries)
    }

    /// What a receive throws once the peer finished at a message boundary.
    static var endedBetweenMessages: NetworkError {
        .unexpectedEndOfStream(received: 0, wanted: TLVFraming.headerSize)
    }

    // MARK: TLV's shapes

    /// The next message in `TLV`'s shape; nil once the peer finished at a message boundary.
    func nextTLV() async throws -> (content: Data, metadata: TLV.Metadata)? {
        try await receive().map { ($0.value, TLV.Metadata(wire: $0.type)) }
    }

    /// `receive()` of a `TLV` connection or stream.
    func receiveTLV() async throws -> (content: Data, metadata: TLV.Metadata) {
        if let message = try decodedTLV() { return message }
        guard let message = try await nextTLV() else { throw Self.endedBetweenMessages }
        return message
    }

    /// `decoded()` in `TLV`'s shape.
    func decodedTLV() throws -> (content: Data, metadata: TLV.Metadata)? {
        try decoded().map { ($0.value, TLV.Metadata(wire: $0.type)) }
    }

    // MARK: Coder's shapes

    /// `send(_:)` of a `Coder` connection or stream: `value`, encoded by `coder`, as one
    /// message of `CoderFraming.messageType`.
    func send(value: some Encodable, using coder: some NetworkCoder, endOfStream: Bool = false, queued: () -> Void = {}) async throws {
        try await send(Self.encode(value, using: coder), type: CoderFraming.messageType, endOfStream: endOfStream, queued: queued)
    }

    /// The next value, decoded by `coder`; nil once the peer finished at a message boundary.
    /// A message that does not decode is consumed and throws `messageDecodingFailed`.
    func nextValue<Value: Decodable>(_ type: Value.Type, using coder: some NetworkCoder) async throws -> (content: Value, metadata: TLV.Metadata)? {
        guard let message = try await receive(sharingStorage: Self.decodesSlices(coder)) else { return nil }
        return try Self.value(type, from: message, using: coder)
    }

    /// `decoded()` as a value: nil if the next message needs a `receive()`.
    func decodedValue<Value: Decodable>(_ type: Value.Type, using coder: some NetworkCoder) throws -> (content: Value, metadata: TLV.Metadata)? {
        guard let message = try decoded(sharingStorage: Self.decodesSlices(coder)) else { return nil }
        return try Self.value(type, from: message, using: coder)
    }

    /// Whether `coder`'s decoder takes a message's value as a slice of the bytes it arrived
    /// in (no copy): Braid's own coders do, as `JSONDecoder` and `PropertyListDecoder` read a
    /// `Data` from its `startIndex`. A user's decoder gets a value indexed from 0, as ever.
    private static func decodesSlices(_ coder: some NetworkCoder) -> Bool {
        coder is NetworkJSONCoder || coder is NetworkPropertyListCoder
    }

    private static func value<Value: Decodable>(
        _ type: Value.Type, from message: TLVMessage, using coder: some NetworkCoder
    ) throws -> (content: Value, metadata: TLV.Metadata) {
        do {
            return (try CoderFraming.decode(type, from: message, using: coder), TLV.Metadata(wire: message.type))
        } catch {
            throw NetworkError(error)
        }
    }

    /// `value` encoded by `coder`, or `messageEncodingFailed`: a message's value, or (`Coder`
    /// over UDP) a whole datagram.
    static func encode(_ value: some Encodable, using coder: some NetworkCoder) throws -> Data {
        do {
            return try CoderFraming.encode(value, using: coder)
        } catch {
            throw NetworkError(error)
        }
    }

    /// A value decoded by `coder` from bare encoded bytes (`Coder` over UDP: a whole
    /// datagram), or `messageDecodingFailed` naming the type and the decoder's reason.
    static func decode<Value: Decodable>(_ type: Value.Type, from encoded: Data, using coder: some NetworkCoder) throws -> Value {
        do {
            return try CoderFraming.decode(type, from: encoded, using: coder)
        } catch {
            throw NetworkError(error)
        }
    }

    /// `receive()` of a `Coder` connection or stream.
    func receiveValue<Value: Decodable>(_ type: Value.Type, using coder: some NetworkCoder) async throws -> (content: Value, metadata: TLV.Metadata) {
        if let value = try decodedValue(type, using: coder) { return value }
        guard let value = try await nextValue(type, using: coder) else { throw Self.endedBetweenMessages }
        return value
    }
}
