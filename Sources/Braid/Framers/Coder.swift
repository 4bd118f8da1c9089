import Foundation

/// What `NetworkConnection` needs to know of a `Coder` stack: the types it sends and receives
/// and their format. `Coder` is the only conforming type.
public protocol CoderProtocol: NetworkProtocol {
    associatedtype Sending: Encodable
    associatedtype Receiving: Decodable
    associatedtype CoderType: NetworkCoder
    /// The format values travel in.
    var coder: CoderType { get }
}

/// Codable values over a byte stream or UDP, as Network.framework's `Coder`: `send(_:)` takes a
/// `Sending` value, `receive()` returns a `Receiving` one.
///
/// ```swift
/// let typed = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) {
///     Coder(String.self, using: .json) { TLS() }
/// }
/// try await typed.send("hello")
/// let message = try await typed.receive().content
/// ```
///
/// On a byte stream, each value, encoded by `coder` (`.json`, `.propertyList`, or any
/// `NetworkCoder`), travels as the value of one TLV message of type
/// `CoderFraming.messageType` (0), so a peer using `TLV` can read and write them too;
/// `maximumMessageSize` bounds it as for `TLV`. A message that does not decode as `Receiving`
/// throws `NetworkError.messageDecodingFailed`, naming the type and the decoder's reason, and
/// the connection stays usable: that message is consumed whole, and the next `receive()`
/// returns the next one.
///
/// `Coder` over `TLS` and `TCP` is implemented, and on QUIC streams
/// (`openStream { quicStream in Coder(T.self, using: .json) { quicStream } }` and
/// `inboundStreams(prepending:_:)`, see `QUICStream`).
///
/// Over `UDP` (connections and listeners; `UDP { IP()... }` too) each value is one datagram:
/// the coder's bytes alone, with no TLV header, as Network.framework sends one message per
/// datagram (so any UDP peer that sends and reads the bare encoded values can talk to it).
/// Each received datagram decodes as one value; one that does not decode throws
/// `messageDecodingFailed` and the next `receive()` gets the next datagram. A value that
/// encodes larger than a UDP datagram carries (65,507 bytes over IPv4) throws
/// `NetworkError.datagramTooLarge`; a received datagram larger than `maximumMessageSize`
/// throws `messageTooLarge` and is dropped, and the connection goes on. UDP may lose,
/// duplicate or reorder values; `metadata.type` is `CoderFraming.messageType`.
///
/// ```swift
/// let position = NetworkConnection(to: .hostPort(host: "game-server.example.com", port: 9000)) {
///     Coder([Int].self, using: .json) { UDP() }
/// }
/// try await position.send([100, 50])
/// let update = try await position.receive().content
/// ```
public struct Coder<Sending: Encodable, Receiving: Decodable, CoderType: NetworkCoder>: CoderProtocol, MessageFramedStack {
    /// The format values travel in.
    public let coder: CoderType
    let framedLower: FramedLower
    /// The largest encoded value accepted from the peer, in bytes (default 16 MiB).
    public private(set) var maximumMessageSize = TLVFraming.defaultMaximumMessageSize

    /// Sends and receives `type` over the stack the builder returns:
    /// `Coder(GameMessage.self, using: .json) { TLS() }`.
    public init<Lower: FramerLowerProtocol>(
        _ type: Sending.Type, using coder: CoderType, @ProtocolStackBuilder _ lower: () -> Lower
    ) where Sending == Receiving {
        self.coder = coder
        framedLower = FramedLower(lower(), framer: "Coder", oneMessagePerDatagram: true)
    }

    /// Sends `Sending` values and receives `Receiving` ones (a client and its server name
    /// them the other way round).
    public init<Lower: FramerLowerProtocol>(
        sending: Sending.Type, receiving: Receiving.Type, using coder: CoderType, @ProtocolStackBuilder _ lower: () -> Lower
    ) {
        self.coder = coder
        framedLower = FramedLower(lower(), framer: "Coder", oneMessagePerDatagram: true)
    }

    /// `init(sending:receiving:using:_:)` with the types in the other order.
    public init<Lower: FramerLowerProtocol>(
        receiving: Receiving.Type, sending: Sending.Type, using coder: CoderType, @ProtocolStackBuilder _ lower: () -> Lower
    ) {
        self.coder = coder
        framedLower = FramedLower(lower(), framer: "Coder", oneMessagePerDatagram: true)
    }

    /// Accepts encoded values of at most `bytes` bytes from the peer; a larger one fails the
    /// connection (on a QUIC stream: the stream) with `NetworkError.messageTooLarge` (over
    /// UDP: that receive throws it, the datagram is dropped, and the connection goes on).
    public func maximumMessageSize(_ bytes: Int) -> Coder {
        with { $0.maximumMessageSize = min(max(0, bytes), TLVFraming.largestEncodableSize) }
    }
}

extension Coder: ModifiedCopy {}
