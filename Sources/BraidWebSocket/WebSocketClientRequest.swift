/// What a server's application is shown of a client's upgrade request, when it answers
/// requests itself (`WebSocketConnection.Configuration.applicationAnswersRequests`).
package struct WebSocketClientRequest: Sendable, Equatable {
    /// The subprotocols the client offers (`Sec-WebSocket-Protocol`), in its order.
    package var subprotocols: [String]
    /// The request's header fields, in order.
    package var headers: [(name: String, value: String)]

    package init(subprotocols: [String], headers: [(name: String, value: String)]) {
        self.subprotocols = subprotocols
        self.headers = headers
    }

    package static func == (lhs: WebSocketClientRequest, rhs: WebSocketClientRequest) -> Bool {
        lhs.subprotocols == rhs.subprotocols && lhs.headers.elementsEqual(rhs.headers) { $0.name == $1.name && $0.value == $1.value }
    }
}
