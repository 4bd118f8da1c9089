/// What an upgrade over the byte stream (WebSocket's) agreed, once ready: what the WebSocket
/// metadata reports.
package struct UpgradeFacts: Sendable, Equatable {
    /// The subprotocol the server chose (nil: none).
    package var subprotocol: String?
    /// The extensions in effect, as the server's `Sec-WebSocket-Extensions` named them (nil:
    /// none).
    package var extensions: String?

    package init(subprotocol: String?, extensions: String?) {
        self.subprotocol = subprotocol
        self.extensions = extensions
    }
}
