import BraidIO

/// What a stack's binding needs to start a listener: its parameters, the address to bind and
/// where new connections go. Made by `NetworkListener.run`.
struct ListenerStart<Top: NetworkProtocol> {
    let parameters: NetworkParameters<Top>
    let address: SocketAddress
    let intake: InboundIntake<Top>
    let newConnectionLimit: Int
    /// The bytes all connections may buffer together (`NetworkListener.connectionBufferLimit`).
    let bufferBudget: ListenerBufferBudget
    /// Called on each new connection's channel, on its loop, before the channel hears any
    /// event (HTTP/3 takes a QUIC channel's streams there).
    let prepareChannel: (@Sendable (any ConnectionChannel) -> Void)?
    /// A framer's largest message, when its messages ride on each connection (set by the
    /// framer's binding before it hands the start to the stack below).
    var maximumMessageSize: Int?
    /// Listen on this Unix-domain socket file instead of `address` (TCP and TLS stacks).
    var unixPath: UnixSocketPath?

    /// The stack each inbound connection gets.
    var stack: Top { parameters.stack }

    /// The loop and sockets a test's `NetworkEnvironment` gives, if any.
    var environment: NetworkEnvironment? { NetworkEnvironment.current }

    /// The loops to serve on: the test's loop, or `count` of the process's loops.
    func loops(_ count: Int) -> [EventLoop] {
        environment.map { [$0.loop] } ?? LoopPool.loops(count)
    }

    /// The UDP sockets of a QUIC or UDP listener: bound to `requiredInterface` (SO_BINDTODEVICE),
    /// if the parameters name one, so only what arrives through it is received; marking what
    /// they send with the service class's DSCP code point when it is not best effort.
    func datagramSockets() throws -> any DatagramSocketFactory {
        var sockets = environment?.sockets ?? UDPSockets()
        if parameters.serviceClass != .bestEffort {
            do { sockets = try sockets.markingDSCP(parameters.serviceClass.dscp) } catch { throw NetworkError(error) }
        }
        guard let name = parameters.requiredInterface?.name else { return sockets }
        return try sockets.boundToDevice(name)
    }

    /// Throws `unsupported` when the parameters ask for Multipath TCP, for listeners of stacks
    /// that are not TCP (`stack` names them in the message).
    func requireNoMultipath(on stack: String) throws {
        if parameters.multipathServiceType != .disabled {
            throw NetworkError.unsupported("multipathServiceType on \(stack) (TCP and TLS listeners apply it)")
        }
    }

    /// Throws `unsupported` for a Unix-domain listener of a stack that runs over IP alone
    /// (`stack` names it).
    func requireIPAddress(on stack: String) throws {
        if let unixPath {
            throw NetworkError.unsupported(
                "Unix-domain endpoints (\(unixPath)) on \(stack): TCP, TLS and UDP listen on them")
        }
    }

    /// Throws when the parameters carry a local endpoint: a listener binds where
    /// `NetworkListener(for:)` says (not silently dropped).
    func requireNoLocalEndpoint() throws {
        if parameters.localEndpoint != nil {
            throw NetworkError.invalidConfiguration(
                "a listener binds to its own endpoint (NetworkListener(for:)); remove localEndpoint from its parameters")
        }
    }
}
