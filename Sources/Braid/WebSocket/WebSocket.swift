import BraidWebSocket

/// WebSocket (RFC 6455) over TLS or TCP, as Network.framework's `WebSocket`: each `send` is
/// one message (text, binary, or a control message named by its metadata's opcode), and each
/// `receive()` returns one whole message, however the peer fragmented it.
///
/// ```swift
/// let socket = NetworkConnection(to: .url(URL(string: "wss://echo.example.com/chat")!)) {
///     WebSocket { TLS() }.subprotocols(["chat"])
/// }
/// try await socket.send("hello")
/// let (content, metadata) = try await socket.receive()
/// print(metadata.opcode, String(decoding: content, as: UTF8.self))
/// ```
///
/// A client sends the HTTP/1.1 upgrade to the endpoint's host and, for a `.url` endpoint, its
/// path and query; a `NetworkListener { WebSocket { TLS() } }` answers upgrades, choosing the
/// first subprotocol the client offers that its own `subprotocols` lists. The connection is
/// ready once the upgrade completes.
///
/// Braid enforces RFC 6455 on what it receives: masking both ways, fragments reassembled with
/// control messages allowed between them, text checked as UTF-8 (close code 1007), control
/// messages of at most 125 bytes, reserved bits and opcodes refused (1002). A message larger
/// than `maximumMessageSize` (16 MiB by default) is refused at the frame that would pass it,
/// with close code 1009, before Braid buffers any of it. permessage-deflate (RFC 7692) is
/// negotiated when `perMessageDeflate(_:)` turns it on (off by default); a compressed message's
/// inflated size is what the maximum bounds.
public struct WebSocket: NetworkProtocol {
    /// What a received message carries besides its content.
    public struct Metadata: Sendable, Hashable {
        /// The message's kind: `.text`, `.binary`, `.ping`, `.pong` or `.close`.
        public let opcode: NWProtocolWebSocket.Opcode
        /// A close message's code (nil for other messages, and for a close without a code).
        public let closeCode: NWProtocolWebSocket.CloseCode?
        /// Whether the content is the whole message: always true, as Braid reassembles
        /// fragments before delivering a message.
        public let isComplete: Bool
        /// Whether nothing follows: true for the peer's close.
        public let lastMessage: Bool
    }

    /// The stack below.
    let lower: ByteStreamLower
    /// Offered by a client in order; accepted by a listener.
    public private(set) var subprotocols: [String] = []
    /// Whether pings are answered by the connection instead of being delivered (default false).
    public private(set) var autoReplyPing = false
    /// Whether the upgrade is skipped: frames from the first byte (default false).
    public private(set) var skipHandshake = false
    /// The largest message accepted from the peer, in bytes (default 16 MiB).
    public private(set) var maximumMessageSize = 16 * 1024 * 1024
    /// Header fields a client adds to its upgrade request, or a listener to its 101 response.
    public private(set) var additionalHeaders: [(name: String, value: String)] = []
    /// permessage-deflate's settings (nil, the default: messages travel uncompressed).
    public private(set) var perMessageDeflate: NWProtocolWebSocket.PerMessageDeflate?
    /// A listener's application answering upgrade requests itself (nil: `subprotocols` choose).
    private(set) var requestHandler: WebSocketRequestHandler?

    /// WebSocket over the stack the builder returns: `WebSocket { TLS() }` for `wss`,
    /// `WebSocket { TCP() }` for `ws`.
    public init<Below: StreamProtocol>(@ProtocolStackBuilder _ builder: () -> Below) {
        lower = ByteStreamLower(builder()) { "WebSocket over \($0) (WebSocket runs over TLS or TCP)" }
    }

    /// The subprotocols a client offers (`Sec-WebSocket-Protocol`), most wanted first; on a
    /// listener, the ones it accepts.
    ///
    /// ```swift
    /// let stack = WebSocket { TLS() }.subprotocols(["chat.v2", "chat"])
    /// ```
    public func subprotocols(_ subprotocols: [String]) -> WebSocket { with { $0.subprotocols = subprotocols } }

    /// With `true`, the connection answers each ping with a pong and does not deliver the ping.
    public func autoReplyPing(_ reply: Bool) -> WebSocket { with { $0.autoReplyPing = reply } }

    /// With `true`, no upgrade: both ends frame from the first byte. Only for peers that agree
    /// on it beforehand; with `perMessageDeflate(_:)` too, both must configure the same settings,
    /// which are taken as agreed.
    public func skipHandshake(_ skip: Bool) -> WebSocket { with { $0.skipHandshake = skip } }

    /// Accepts messages of at most `bytes` bytes; a larger one closes the connection with
    /// code 1009 and fails it with `NetworkError.messageTooLarge`.
    public func maximumMessageSize(_ bytes: Int) -> WebSocket { with { $0.maximumMessageSize = min(max(0, bytes), Int(UInt32.max)) } }

    /// Header fields to add to the client's upgrade request (a listener: to its response).
    ///
    /// ```swift
    /// let stack = WebSocket { TLS() }.additionalHeaders([(name: "Authorization", value: "Bearer token")])
    /// ```
    public func additionalHeaders(_ headers: [(name: String, value: String)]) -> WebSocket { with { $0.additionalHeaders = headers } }

    /// Compresses messages with permessage-deflate (RFC 7692) when the peer agrees: a client
    /// offers `deflate`, a listener accepts offers with it. Nil turns it off (the default).
    /// See `NWProtocolWebSocket.PerMessageDeflate` for what each setting negotiates.
    ///
    /// ```swift
    /// let stack = WebSocket { TCP() }.perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate())
    /// ```
    public func perMessageDeflate(_ deflate: NWProtocolWebSocket.PerMessageDeflate?) -> WebSocket { with { $0.perMessageDeflate = deflate } }

    /// Braid: a listener answers each upgrade request with `handler`'s response, given the
    /// subprotocols the client offers (in its order) and the request's header fields: it may
    /// choose a subprotocol among the client's, add header fields, or reject the request (403;
    /// the connection fails). The connection becomes ready once it accepts; the handshake
    /// timeout covers the wait. Replaces `subprotocols(_:)`'s choice.
    /// The classic API's `NWProtocolWebSocket.Options.setClientRequestHandler(_:handler:)`.
    ///
    /// ```swift
    /// let stack = WebSocket { TCP() }.clientRequestHandler { offered, _ in
    ///     NWProtocolWebSocket.Response(status: .accept, subprotocol: offered.contains("chat.v2") ? "chat.v2" : nil, additionalHeaders: nil)
    /// }
    /// ```
    public func clientRequestHandler(
        _ handler: @escaping @Sendable (_ subprotocols: [String], _ additionalHeaders: [(name: String, value: String)]) async -> NWProtocolWebSocket.Response
    ) -> WebSocket {
        with { $0.requestHandler = .awaiting(handler) }
    }

    /// A listener answers upgrade requests through `handler`.
    func answeringRequests(with handler: WebSocketRequestHandler?) -> WebSocket { with { $0.requestHandler = handler } }

    /// The engine's configuration for one connection.
    func configuration(role: WebSocketConnection.Role) -> WebSocketConnection.Configuration {
        var configuration = WebSocketConnection.Configuration(role: role)
        configuration.subprotocols = subprotocols
        configuration.autoReplyPing = autoReplyPing
        configuration.skipHandshake = skipHandshake
        configuration.maximumMessageSize = maximumMessageSize
        configuration.additionalHeaders = additionalHeaders
        configuration.deflate = perMessageDeflate?.settings
        configuration.applicationAnswersRequests = role == .server && requestHandler != nil
        return configuration
    }
}

extension WebSocket: ModifiedCopy {}
