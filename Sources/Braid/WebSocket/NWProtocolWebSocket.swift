import BraidCore
import Dispatch

/// WebSocket in the classic API's stacks and the names both APIs share: `Opcode`,
/// `CloseCode`, `Options` (inserted into `NWParameters.defaultProtocolStack.applicationProtocols`),
/// `Metadata` (a message's opcode and close code; the connection's selected subprotocol) and
/// `PerMessageDeflate` (compression, Braid's own: Network.framework has none).
///
/// ```swift
/// let options = NWProtocolWebSocket.Options()
/// options.autoReplyPing = true
/// options.setSubprotocols(["chat"])
/// let parameters = NWParameters.tls
/// parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
/// ```
public enum NWProtocolWebSocket {
    /// WebSocket's definition.
    public static let definition = NWProtocolDefinition(name: "websocket")

    /// The versions of the protocol: RFC 6455's, the only one.
    public enum Version: Sendable, Hashable {
        /// RFC 6455 (`Sec-WebSocket-Version: 13`).
        case version13
    }

    /// A message's kind.
    public enum Opcode: Sendable, Hashable {
        /// A continuation frame (never delivered: Braid reassembles messages).
        case cont
        /// A text message (UTF-8).
        case text
        /// A binary message.
        case binary
        /// The close handshake's message, with its code.
        case close
        /// A ping, asking for a pong.
        case ping
        /// A pong, answering a ping (or unsolicited, as a heartbeat).
        case pong

        /// The frame opcode's value (RFC 6455 section 5.2).
        var wire: UInt8 {
            switch self {
            case .cont: 0x0
            case .text: 0x1
            case .binary: 0x2
            case .close: 0x8
            case .ping: 0x9
            case .pong: 0xA
            }
        }

        init?(wire: UInt8) {
            switch wire {
            case 0x0: self = .cont
            case 0x1: self = .text
            case 0x2: self = .binary
            case 0x8: self = .close
            case 0x9: self = .ping
            case 0xA: self = .pong
            default: return nil
            }
        }

        var isControl: Bool { wire & 0x8 != 0 }
    }

    /// A close message's code (RFC 6455 section 7.4).
    public enum CloseCode: Sendable, Hashable {
        /// A code RFC 6455 defines.
        case protocolCode(Defined)
        /// A code registered for applications and libraries, 3000 to 3999.
        case applicationCode(UInt16)
        /// A code for private use, 4000 to 4999.
        case privateCode(UInt16)

        /// The codes RFC 6455 defines.
        public enum Defined: UInt16, Sendable, Hashable {
            /// 1000: the purpose of the connection is fulfilled.
            case normalClosure = 1000
            /// 1001: the endpoint is going away (a server shutting down, a page left).
            case goingAway = 1001
            /// 1002: the peer broke the protocol.
            case protocolError = 1002
            /// 1003: a kind of data the endpoint cannot accept (text where it takes binary).
            case unsupportedData = 1003
            /// Never sent: reported for a close without a code.
            case noStatusReceived = 1005
            /// Never sent: the connection ended without a close.
            case abnormalClosure = 1006
            /// 1007: a message's data did not fit its type (text that is not UTF-8).
            case invalidFramePayloadData = 1007
            /// 1008: a message broke the endpoint's policy.
            case policyViolation = 1008
            /// 1009: a message too large to process.
            case messageTooBig = 1009
            /// 1010 (clients): the server did not agree to an extension the client needs.
            case mandatoryExtension = 1010
            /// 1011 (servers): an unexpected condition kept the server from serving the request.
            case internalServerError = 1011
            /// Never sent: the TLS handshake failed.
            case tlsHandshake = 1015
        }

        /// The code as it travels.
        public var rawValue: UInt16 {
            switch self {
            case .protocolCode(let defined): defined.rawValue
            case .applicationCode(let code), .privateCode(let code): code
            }
        }

        /// The code a close frame carried: a defined one, else by range (codes 1012 to 1014,
        /// registered later, read as `applicationCode`).
        public init(rawValue: UInt16) {
            if let defined = Defined(rawValue: rawValue) {
                self = .protocolCode(defined)
            } else if rawValue >= 4000 {
                self = .privateCode(rawValue)
            } else {
                self = .applicationCode(rawValue)
            }
        }
    }

    /// WebSocket options for the classic API, turned into a `WebSocket` over the stack below
    /// (TLS or TCP) when the connection starts.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        private struct Values {
            var autoReplyPing = false
            var skipHandshake = false
            var maximumMessageSize = 16 * 1024 * 1024
            var subprotocols: [String] = []
            var additionalHeaders: [(name: String, value: String)] = []
            var perMessageDeflate: PerMessageDeflate?
            var requestHandler: WebSocketRequestHandler?
        }
        private let values = Locked(Values())

        /// Options for `version` (RFC 6455's, the default).
        public init(_ version: Version = .version13) {}

        /// Answer each ping with a pong instead of delivering it (default false).
        public var autoReplyPing: Bool {
            get { values.withLock { $0.autoReplyPing } }
            set { values.withLock { $0.autoReplyPing = newValue } }
        }
        /// Frame from the first byte, without the upgrade (default false).
        public var skipHandshake: Bool {
            get { values.withLock { $0.skipHandshake } }
            set { values.withLock { $0.skipHandshake = newValue } }
        }
        /// The largest message accepted from the peer, in bytes (default 16 MiB).
        public var maximumMessageSize: Int {
            get { values.withLock { $0.maximumMessageSize } }
            set { values.withLock { $0.maximumMessageSize = newValue } }
        }

        /// permessage-deflate's settings (default nil: messages travel uncompressed); see
        /// `NWProtocolWebSocket.PerMessageDeflate`.
        ///
        /// ```swift
        /// let options = NWProtocolWebSocket.Options()
        /// options.perMessageDeflate = NWProtocolWebSocket.PerMessageDeflate()
        /// ```
        public var perMessageDeflate: PerMessageDeflate? {
            get { values.withLock { $0.perMessageDeflate } }
            set { values.withLock { $0.perMessageDeflate = newValue } }
        }

        /// Adds header fields to the client's upgrade request.
        public func setAdditionalHeaders(_ headers: [(name: String, value: String)]) {
            values.withLock { $0.additionalHeaders += headers }
        }

        /// Adds subprotocols to those the client offers (a listener: accepts).
        public func setSubprotocols(_ subprotocols: [String]) {
            values.withLock { $0.subprotocols += subprotocols }
        }

        /// A listener answers each client's upgrade request with `handler`, called on `queue`
        /// with the subprotocols the client offers (in its order) and the request's header
        /// fields: accept with a subprotocol among them (or none) and header fields for the
        /// response, or reject. The connection becomes ready once it accepts.
        ///
        /// ```swift
        /// let options = NWProtocolWebSocket.Options()
        /// options.setClientRequestHandler(DispatchQueue(label: "upgrades")) { subprotocols, _ in
        ///     let chosen = subprotocols.first { $0.hasPrefix("chat.") }
        ///     return NWProtocolWebSocket.Response(status: chosen == nil ? .reject : .accept, subprotocol: chosen, additionalHeaders: nil)
        /// }
        /// ```
        public func setClientRequestHandler(
            _ queue: DispatchQueue, handler: @escaping @Sendable ([String], [(name: String, value: String)]) -> NWProtocolWebSocket.Response
        ) {
            let handler = WebSocketRequestHandler.calling(handler, on: queue)
            values.withLock { $0.requestHandler = handler }
        }

        override func copy() -> NWProtocolOptions {
            let copy = Options()
            let current = values.withLock { $0 }
            copy.values.withLock { $0 = current }
            return copy
        }

        /// The new API's stack: WebSocket over `lower` (TLS or TCP).
        override func stack(over lower: any StackBinding) throws -> any StackBinding {
            let current = values.withLock { $0 }
            var socket: WebSocket
            switch lower {
            case let tls as TLS: socket = WebSocket { tls }
            case let tcp as TCP: socket = WebSocket { tcp }
            default: throw NetworkError.unsupported("WebSocket over \(type(of: lower)) (WebSocket runs over TLS or TCP)")
            }
            socket = socket.autoReplyPing(current.autoReplyPing).skipHandshake(current.skipHandshake)
                .maximumMessageSize(current.maximumMessageSize).subprotocols(current.subprotocols)
                .additionalHeaders(current.additionalHeaders).perMessageDeflate(current.perMessageDeflate)
                .answeringRequests(with: current.requestHandler)
            return socket
        }
    }

    /// A WebSocket message's metadata in the classic API: its opcode, and a close's code.
    ///
    /// ```swift
    /// let metadata = NWProtocolWebSocket.Metadata(opcode: .close)
    /// metadata.closeCode = .protocolCode(.goingAway)
    /// ```
    public final class Metadata: NWProtocolMetadata, @unchecked Sendable {
        /// The message's kind.
        public let opcode: Opcode
        /// The subprotocol the server chose in the upgrade (nil: none, or not known here): set
        /// on the connection's metadata, `connection.metadata(definition:
        /// NWProtocolWebSocket.definition)`, once the connection is ready.
        ///
        /// ```swift
        /// let webSocket = connection.metadata(definition: NWProtocolWebSocket.definition) as? NWProtocolWebSocket.Metadata
        /// print(webSocket?.selectedSubprotocol ?? "none")
        /// ```
        public let selectedSubprotocol: String?
        private let code = Locked(CloseCode.protocolCode(.normalClosure))

        /// Metadata for a message of `opcode`.
        public init(opcode: Opcode) {
            self.opcode = opcode
            selectedSubprotocol = nil
        }

        /// The connection's metadata, with what the upgrade agreed.
        init(opcode: Opcode, selectedSubprotocol: String?) {
            self.opcode = opcode
            self.selectedSubprotocol = selectedSubprotocol
        }

        /// A close message's code (default `normalClosure`).
        public var closeCode: CloseCode {
            get { code.withLock { $0 } }
            set { code.withLock { $0 = newValue } }
        }
    }
}
