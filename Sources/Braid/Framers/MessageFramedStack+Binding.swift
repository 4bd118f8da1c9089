import BraidIO

/// `TLV` and `Coder`: a connection of the stack below (TLS, TCP, or for `Coder` UDP) whose
/// messages ride on it, so the framer's binding is the lower stack's, told the framer's
/// largest message.
extension StackBinding where Self: MessageFramedStack {
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        framedLower.binding.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: self.maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        try framedLower.binding.startClient(start)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        var listener = listener
        listener.maximumMessageSize = maximumMessageSize
        return try await framedLower.binding.startListener(listener)
    }
}

extension TLV: StackBinding {}
extension Coder: StackBinding {}

extension FramedLower {
    /// The binding of the stack under the framer (one that fails every start, saying why, for
    /// a stack a framer cannot run over on a connection).
    var binding: any StackBinding {
        switch self {
        case .tls(let tls): tls
        case .tcp(let tcp): tcp
        case .udp(let udp): udp
        case .quicStream, .unsupported:
            UnsupportedStack(connectionReason: unsupportedOnConnections ?? "", listenerReason: (unsupportedOnConnections ?? "") + " (listener)")
        }
    }
}
