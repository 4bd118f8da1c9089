import BraidIO
import Foundation
import Synchronization

extension NetworkConnection where ApplicationProtocol == DTLS {
    /// Sends `content` as one DTLS message: one record in one datagram. Starts the connection
    /// if needed; sends made before the handshake completes wait for it. Returns once the
    /// message is queued (a burst shares one pass of the loop, as UDP's sends do). DTLS, like
    /// UDP, does not say whether it arrived. Throws `NetworkError.datagramTooLarge` for a
    /// message larger than one datagram of `maximumDatagramSize` carries after DTLS's record
    /// header (13 bytes) and the cipher's nonce and tag: 1,163 bytes at the default 1,200 under
    /// AES-GCM, 1,171 under ChaCha20-Poly1305.
    ///
    /// ```swift
    /// try await sensor.send(Data("reading:21.5".utf8))
    /// ```
    public func send<Content: Collection & Sendable>(_ content: Content) async throws where Content.Element == UInt8 {
        try await sendDatagram(content as? Data ?? Data(content))
    }

    /// Runs `body` and sends the messages it sends (from any task) together when it returns,
    /// in one pass of the event loop. Network.framework's `batch`.
    ///
    /// ```swift
    /// try await sensor.batch {
    ///     for reading in readings { try await sensor.send(reading) }
    /// }
    /// ```
    public func batch<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await holdingDatagramDrain(body)
    }

    /// The next message, whole, with the metadata of the datagram it came in. Starts the
    /// connection if needed. Forged, replayed and stray datagrams never reach here (DTLS drops
    /// them). Throws the connection's error once it has ended and every message was read.
    ///
    /// ```swift
    /// let (reply, _) = try await sensor.receive()
    /// ```
    public func receive() async throws -> (content: Data, metadata: UDP.Metadata) {
        try await receiveDatagram()
    }

    /// Every message received, in arrival order, until the connection is cancelled (the
    /// iteration ends) or fails (it throws).
    ///
    /// ```swift
    /// for try await (content, _) in sensor.messages {
    ///     print("\(content.count) bytes")
    /// }
    /// ```
    public var messages: NetworkMessages<(content: Data, metadata: UDP.Metadata)> {
        NetworkMessages(makingSource: { [self] in datagramSource() })
    }
}
