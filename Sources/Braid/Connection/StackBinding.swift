import BraidIO

/// How a stack becomes connections: adopted by each stack type (`QUIC`, `TLS`, `TCP`, `UDP`,
/// and the framers over them), in that stack's own folder. The shared connection and listener
/// code asks the stack's binding, never the stack's type: adding a stack is a folder with its
/// binding, not an edit of `NetworkConnection`, `ConnectionCore` or `NetworkListener`.
protocol StackBinding: NetworkProtocol {
    /// The core of a new connection over this stack, with its channel (a client's channel
    /// exists from `NetworkConnection.init`). `maximumMessageSize`: a framer's messages ride on
    /// the connection (nil: none do).
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore
    /// Checks the options against `start`'s parameters, then begins establishment on the
    /// connection's loop (`ClientStart.begin`). What it throws fails the connection.
    func startClient(_ start: ClientStart) throws
    /// Binds the listener's sockets on its loops and returns them; each inbound connection is
    /// handed to `listener.intake`. What it throws fails the listener.
    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup
    /// The `stack` label of the stack's metrics.
    var metricsName: String { get }
}

extension StackBinding {
    /// The stack type's name in lower case, without generic arguments: `quic`, `tls`, `tcp`,
    /// `udp`, `dtls`, `websocket`, `tlv`, `coder`, `framer`.
    var metricsName: String {
        let name = String(describing: Self.self)
        return String(name.prefix { $0 != "<" }).lowercased()
    }
}

/// Finds a stack's binding.
enum StackBindings {
    /// The binding of `stack`; a protocol without one (`IP`, a `QUICStream` as a connection's
    /// stack, a type of the caller's) gets one that fails every start with
    /// `NetworkError.unsupported`.
    static func binding(of stack: some NetworkProtocol) -> any StackBinding {
        if let binding = stack as? any StackBinding { return binding }
        let name = type(of: stack)
        return UnsupportedStack(
            connectionReason: "\(name) connections; QUIC, TLS, TCP and UDP are implemented",
            listenerReason: "\(name) listeners; QUIC, TLS, TCP and UDP are implemented")
    }
}

/// The binding of a stack Braid cannot run: a connection fails on start, a listener in `run`,
/// both with `NetworkError.unsupported`, saying why.
struct UnsupportedStack: StackBinding {
    let connectionReason: String
    let listenerReason: String

    /// A core that makes no socket and holds no engine until a start, which never comes: a
    /// byte-stream one under a framer (its API reads the message receiver), else a datagram one.
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        guard let maximumMessageSize else { return ConnectionCore(datagramsOn: loop, endpointDescription: endpointDescription) }
        return ConnectionCore(unstartedByteStreamOn: loop, endpointDescription: endpointDescription, maximumMessageSize: maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        throw NetworkError.unsupported(connectionReason)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        throw NetworkError.unsupported(listenerReason)
    }
}
