@_exported import BraidFramers

/// A protocol a message framer (`TLV`, `Coder`) can run over: `TLS` and `TCP` on a
/// connection, `QUICStream` on a QUIC stream (`openStream { stream in TLV { stream } }`), and
/// `UDP` (not implemented: TLV is a byte-stream framer, and a connection or listener over UDP
/// fails on start with `NetworkError.unsupported`).
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
    /// Not implemented: what the connection or listener fails with.
    case unsupported(String)

    init(_ lower: some FramerLowerProtocol, framer: String) {
        switch lower {
        case let tls as TLS: self = .tls(tls)
        case let tcp as TCP: self = .tcp(tcp)
        case is QUICStream: self = .quicStream
        default:
            self = .unsupported(
                "\(framer) over \(type(of: lower)) (not implemented: \(framer) frames a byte stream, over TLS, TCP or a QUIC stream)")
        }
    }

    /// Why a connection or listener cannot run this stack (nil: TLS and TCP can).
    var unsupportedOnConnections: String? {
        switch self {
        case .tls, .tcp: nil
        case .quicStream: "a framer on a QUICStream as a connection's stack: prepend it to a stream with openStream { stream in TLV { stream } } or inboundStreams(prepending:)"
        case .unsupported(let what): what
        }
    }

    /// The TCP options (default ones for an unsupported lower stack, which never connects).
    var tcp: TCP {
        switch self {
        case .tls(let tls): tls.tcp
        case .tcp(let tcp): tcp
        case .quicStream, .unsupported: TCP()
        }
    }

    var tls: TLS? {
        if case .tls(let tls) = self { tls } else { nil }
    }
}

/// A stack whose connections carry whole messages over a byte stream: `TLV` and `Coder`. The
/// connection is a byte-stream connection of the lower stack, with a TLV decoder on top.
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
/// `NetworkError.unsupported`: TLV frames a byte stream.
public struct TLV: NetworkProtocol, MessageFramedStack {
    /// What a received message carries besides its content.
    public struct Metadata: Sendable, Hashable {
        /// The message's type, as the sender passed it to `send(_:type:)`.
        public var type: UInt32

        public init(type: UInt32) { self.type = type }
    }

    let framedLower: FramedLower
    /// The largest message value accepted from the peer, in bytes (default 16 MiB).
    public private(set) var maximumMessageSize = TLVFraming.defaultMaximumMessageSize

    /// TLV over the stack the builder returns: `TLV { TLS() }` or `TLV { TCP() }`, or
    /// `TLV { quicStream }` in the closure of `openStream` and `inboundStreams(prepending:_:)`.
    public init<Lower: FramerLowerProtocol>(@ProtocolStackBuilder _ lower: () -> Lower) {
        framedLower = FramedLower(lower(), framer: "TLV")
    }

    /// Accepts messages of at most `bytes` bytes (0 to UInt32.max) from the peer; a larger
    /// one fails the connection (on a QUIC stream: the stream) with
    /// `NetworkError.messageTooLarge`.
    ///
    /// ```swift
    /// let stack = TLV { TCP() }.maximumMessageSize(64 * 1024)
    /// ```
    public func maximumMessageSize(_ bytes: Int) -> TLV {
        var copy = self
        copy.maximumMessageSize = min(max(0, bytes), TLVFraming.largestEncodableSize)
        return copy
    }
}
