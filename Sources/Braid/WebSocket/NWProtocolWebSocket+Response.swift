import BraidWebSocket
import Dispatch

extension NWProtocolWebSocket {
    /// A listener's answer to a client's upgrade request, from the handler set with
    /// `NWProtocolWebSocket.Options.setClientRequestHandler(_:handler:)`: accept with a
    /// subprotocol (one the client offered, or nil for none) and header fields for the 101
    /// response, or reject, which answers 403 and fails the connection.
    ///
    /// ```swift
    /// let response = NWProtocolWebSocket.Response(status: .accept, subprotocol: "chat.v2", additionalHeaders: nil)
    /// ```
    public struct Response: Sendable {
        /// Whether the request is accepted.
        public enum Status: Sendable, Hashable {
            /// Upgrade the connection (101 Switching Protocols).
            case accept
            /// Refuse the upgrade (403 Forbidden): the connection fails.
            case reject
        }

        /// Whether the request is accepted.
        public let status: Status
        /// The subprotocol chosen among the client's (nil: none). One the client did not offer
        /// fails the connection with 500.
        public let subprotocol: String?
        /// Header fields added to the response (nil: none).
        public let additionalHeaders: [(name: String, value: String)]?

        /// An answer with `status`, `subprotocol` and `additionalHeaders`.
        public init(status: Status, subprotocol: String?, additionalHeaders: [(name: String, value: String)]?) {
            self.status = status
            self.subprotocol = subprotocol
            self.additionalHeaders = additionalHeaders
        }

        /// The engine's form.
        var answer: WebSocketRequestAnswer {
            WebSocketRequestAnswer(accepted: status == .accept, subprotocol: subprotocol, additionalHeaders: additionalHeaders ?? [])
        }
    }
}

/// A listener's way of answering upgrade requests: the request's subprotocols and header
/// fields in, a `Response` out, through `decide` (from any thread, once).
struct WebSocketRequestHandler: Sendable {
    let answer: @Sendable (WebSocketClientRequest, @escaping @Sendable (WebSocketRequestAnswer) -> Void) -> Void

    /// The classic handler, called on `queue`.
    static func calling(
        _ handler: @escaping @Sendable ([String], [(name: String, value: String)]) -> NWProtocolWebSocket.Response, on queue: DispatchQueue
    ) -> WebSocketRequestHandler {
        WebSocketRequestHandler { request, decide in
            queue.async { decide(handler(request.subprotocols, request.headers).answer) }
        }
    }

    /// The new API's handler, run in a task of its own.
    static func awaiting(
        _ handler: @escaping @Sendable ([String], [(name: String, value: String)]) async -> NWProtocolWebSocket.Response
    ) -> WebSocketRequestHandler {
        WebSocketRequestHandler { request, decide in
            Task { decide(await handler(request.subprotocols, request.headers).answer) }
        }
    }
}
