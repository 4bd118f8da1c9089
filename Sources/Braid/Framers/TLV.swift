@_exported import BraidFramers

/// A protocol a message framer (`TLV`, `Coder`) can run over: `TLS` and `TCP` on a
/// connection, `QUICStream` on a QUIC stream (`openStream { stream in TLV { stream } }`), and
/// `UDP` for `Coder` (one value per datagram). `TLV { UDP() }` is not implemented (TLV frames
/// a byte stream): a connection or listener over it fails on start with
/// `NetworkError.unsupported`.
public protocol FramerLowerProtocol: NetworkProtocol {}

extension TLS: FramerLowerProtocol {}
extension TCP: FramerLowerProtocol {}
extension UDP: FramerLowerProtocol {}
extension QUICStream: FramerLowerProtocol {}

/// The stack under a framer, by kind.
enum FramedLower: Sendable {
    case tls(TLS)
    case tcp(TCP)
    /// A QUIC stream's framer, from the closure of `openStream` or `inboundStreams`.
    case quicStream
    /// One message per datagram (`Coder { UDP() }`): a UDP connection, no framing bytes.
    case udp(UDP)
    /// Not implemented: what the connection or listener fails with.
    case unsupported(String)

    /// `framer` over `lower`; `oneMessagePerDatagram`: the framer can run over UDP, each
    /// message one datagram (`Coder`; `TLV` frames a byte stream, and cannot).
    init(_ lower: some FramerLowerProtocol, framer: String, oneMessagePerDatagram: Bool) {
        switch lower {
        case let tls as TLS: self = .tls(tls)
        case let tcp as TCP: self = .tcp(tcp)
        case is QUICStream: self = .quicStream
        case let udp as UDP where oneMessagePerDatagram: self = .udp(udp)
        default:
            self = .unsupported(
                "\(framer) over \(type(of: lower)) (not implemented: \(framer) frames a byte stream, over TLS, TCP or a QUIC stream; "
                    + "for one message per datagram use Coder { UDP() }, or UDP() itself)")
        }
    }

    /// Why a connection or listener cannot run this stack (nil: TLS, TCP and UDP can).
    var unsupportedOnConnections: String? {
        switch self {
        case .tls, .tcp, .udp: nil
        case .quicStream: "a framer on a QUICStream as a connection's stack: prepend it to a stream with openStream { stream in TLV { stream } } or inboundStreams(prepending:)"
        case .unsupported(let what): what
        }
    }

    /// The TCP options (default ones for an unsupported lower stack, which never connects).
    var tcp: TCP {
        switch self {
        case .tls(let tls): tls.tcp
        case .tcp(let tcp): tcp
        case .quicStream, .udp, .unsupported: TCP()
        }
    }

    var tls: TLS? {
        if case .tls(let tls) = self { tls } else { nil }
    }

    /// The UDP options of a framer that sends one message per datagram.
    var udp: UDP? {
        if case .udp(let udp) = self { udp } else { nil }
    }
}

/// A stack whose connections carry whole messages: `TLV` and `Coder`. The connection is a
/// byte-stream connection of the lower stack, with a TLV decoder on top, or (`Coder` over
/// `UDP`) a UDP connection, one message per datagram.
protocol MessageFramedStack: NetworkProtocol {
    var framedLower: FramedLower { get }
    var maximumMessageSize: Int { get }
}

/// Type-length-value messages over a byte stream, as Network.framework's `TLV`: each
/// `send(_:type:)` is one message, and each `receive()` returns one whole message and its
/// type, however TCP split or merged the bytes.
///
/// ```swift
/// let chat = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) { TLV { TLS() } }
/// try await chat.send(Data("hello".utf8), type: 1)
/// let (content, metadata) = try await chat.receive()
/// ```
///
/// On the wire (`TLVFraming`): the type (UInt32) then the value's length (UInt32), both
/// big-endian, then the value. A peer announcing a value larger than `maximumMessageSize`
/// (16 MiB by default) fails the connection with `NetworkError.messageTooLarge` before Braid
/// holds more than the bytes that actually arrived.
///
/// `TLV { TLS() }` and `TLV { TCP() }` are implemented on connections, and `TLV { quicStream }`
/// on QUIC streams (`openStream { quicStream in TLV { quicStream } }` and
/// `inboundStreams(prepending:_:)`, see `QUICStream`), where a hostile length ends that stream
/// rather than the connection. Over `UDP` a connection or listener fails with
/// `NetworkError.unsupported`: TLV frames a byte stream (`Coder { UDP() }` sends one value per
/// datagram, and `UDP()` itself one message per datagram).
public struct TLV: NetworkProtocol, MessageFramedStack {
    /// What a received message carries besides its content.
    public struct Metadata: Sendable, Hashable {
        /// The message's type, as the sender passed it to `send(_:type:)`.
        public var type: Int

        public init(type: Int) { self.type = type }

        /// The metadata of a message whose type field carried `wire`.
        init(wire: UInt32) { type = Int(wire) }
    }

    let framedLower: FramedLower
    /// The largest message value accepted from the peer, in bytes (default 16 MiB).
    public private(set) var maximumMessageSize = TLVFraming.defaultMaximumMessageSize

    /// TLV over the stack the builder returns: `TLV { TLS() }` or `TLV { TCP() }`, or
    /// `TLV { quicStream }` in the closure of `openStream` and `inboundStreams(prepending:_:)`.
    public init<Lower: FramerLowerProtocol>(@ProtocolStackBuilder _ lower: () -> Lower) {
        framedLower = FramedLower(lower(), framer: "TLV", oneMessagePerDatagram: false)
    }

    /// Accepts messages of at most `bytes` bytes (0 to UInt32.max) from the peer; a larger
    /// one fails the connection (on a QUIC stream: the stream) with
    /// `NetworkError.messageTooLarge`.
    ///
    /// ```swift
    /// let stack = TLV { TCP() }.maximumMessageSize(64 * 1024)
    /// ```
    public func maximumMessageSize(_ bytes: Int) -> TLV {
        with { $0.maximumMessageSize = min(max(0, bytes), TLVFraming.largestEncodableSize) }
    }
}

extension TLV: ModifiedCopy {}
