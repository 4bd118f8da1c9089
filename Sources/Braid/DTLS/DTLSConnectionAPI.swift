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

    /// The application protocol both ends agreed on (ALPN), once ready; nil if none was. On a
    /// listener's connection: the protocol of `DTLS.alpn(_:)` chosen for the client's offer.
    ///
    /// ```swift
    /// if sensor.negotiatedALPN == "coap" { try await sensor.send(Data("GET /temp".utf8)) }
    /// ```
    public var negotiatedALPN: String? { shared.snapshot.withLock { $0.negotiatedALPN } }

    /// Braid: datagrams from the peer this connection dropped so far, rather than the path:
    /// those beyond `DTLS.unreadMessageLimit` when the application stops reading (the oldest
    /// go), and those beyond `DTLS.verdictQueueLimit` that arrive while the handshake waits
    /// for a verify block's verdict. DTLS, like UDP, does not recover them; a count that grows
    /// says the application reads too slowly or judges too slowly.
    ///
    /// ```swift
    /// if await sensor.droppedDatagramCount > 0 { print("reading too slowly") }
    /// ```
    public var droppedDatagramCount: Int {
        get async {
            let core = core
            return (try? await loop.submit { _ in core.value.datagram.droppedDatagrams }) ?? 0
        }
    }
}
