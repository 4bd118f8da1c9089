import BraidIO

/// The TCP binding, which TLS shares: a `ByteStreamChannel` per connection over a TCP socket,
/// with a layer over the socket when `layering` is set (TLS is this binding plus a TLS layer).
/// A client races TCP connects (`StreamEstablishment`; the layer then runs over the winner); a
/// listener is a `TCPServerGroup` whose accepted sockets become connections
/// (`InboundByteStreams`).
struct ByteStreamStack {
    let tcp: TCP
    /// What runs over each connection's socket (TLS); nil: plain TCP.
    let layering: (any ByteStreamLayering)?

    /// The layer's handshake deadline (plain TCP has no handshake: its connect has its own
    /// timeout, `TCP.connectionTimeout`).
    private var handshakeTimeout: Duration { layering?.handshakeTimeout ?? TLS().handshakeTimeout }

    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        ConnectionCore(
            byteStreamOn: loop, endpointDescription: endpointDescription, tcp: tcp, handshakeTimeout: handshakeTimeout,
            maximumMessageSize: maximumMessageSize, borrowsLargeSends: layering == nil && maximumMessageSize == nil)
    }

    func startClient(_ start: ClientStart) throws {
        try tcp.validate()
        try layering?.validateClient()
        if case .unix = start.endpoint, start.multipath != .disabled {
            throw NetworkError.invalidConfiguration("multipathServiceType on a Unix-domain endpoint (\(start.endpoint)): remove it")
        }
        let tcp = start.fastOpenAllowed ? tcp.fastOpenAllowed(true) : tcp
        let layering = layering, endpoint = start.endpoint, sockets = start.streamSockets
        let serviceClass = start.serviceClass, multipath = start.multipath
        start.begin { core in
            StreamEstablishment(
                core: core, tcp: tcp, layering: layering, endpoint: endpoint, serviceClass: serviceClass, multipath: multipath,
                sockets: sockets)
        }
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try listener.requireNoLocalEndpoint()
        try tcp.validate()
        let layers = try layering?.serverLayers()
        let parameters = listener.parameters
        let tcp = parameters.fastOpenAllowed ? tcp.fastOpenAllowed(true) : tcp
        // The listening socket is MPTCP when asked (accepting MPTCP and plain TCP clients), and
        // every accepted connection gets the service class's mark.
        var options = TCPOptions(tcp, serviceClass: parameters.serviceClass, multipath: parameters.multipathServiceType)
        // `requiredInterface`: the listening socket is bound to it, and so is every connection it accepts.
        options.device = parameters.requiredInterface?.name
        if let path = listener.unixPath, options.device != nil || options.multipath {
            throw NetworkError.invalidConfiguration(
                "requiredInterface and multipathServiceType on a Unix-domain listener (\(path)): remove them")
        }
        let admission = ConnectionAdmission(limit: listener.newConnectionLimit, perAddressLimit: tcp.newConnectionLimitPerAddress)
        let stack = listener.stack, intake = listener.intake, maximumMessageSize = listener.maximumMessageSize
        let handshakeTimeout = handshakeTimeout
        return try await TCPServerGroup.start(
            loops: listener.loops(tcp.serverLoops), bindTo: listener.address, unixPath: listener.unixPath, options: options,
            sockets: listener.environment?.streamSockets ?? TCPSockets()
        ) { [budget = listener.bufferBudget] context in
            let inbound = InboundByteStreams(
                stack: stack, tcp: tcp, layers: layers, handshakeTimeout: handshakeTimeout, maximumMessageSize: maximumMessageSize,
                admission: admission, budget: budget, intake: intake)
            inbound.watchBufferBudget(context)
            return inbound.accept
        }
    }
}

/// Plain TCP: a byte stream each way on the connection.
extension TCP: StackBinding {
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        ByteStreamStack(tcp: self, layering: nil).makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        try ByteStreamStack(tcp: self, layering: nil).startClient(start)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try await ByteStreamStack(tcp: self, layering: nil).startListener(listener)
    }
}
