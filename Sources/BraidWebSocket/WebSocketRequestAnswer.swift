/// A server application's answer to a client's upgrade request: accept it with a subprotocol
/// (one the client offered, or none) and header fields for the 101 response, or refuse it.
package struct WebSocketRequestAnswer: Sendable {
    package var accepted: Bool
    package var subprotocol: String?
    package var additionalHeaders: [(name: String, value: String)]

    package init(accepted: Bool, subprotocol: String?, additionalHeaders: [(name: String, value: String)]) {
        self.accepted = accepted
        self.subprotocol = subprotocol
        self.additionalHeaders = additionalHeaders
    }
}
