import BraidIO

/// UDP connections: a `DatagramChannel` each; a client binds one socket toward the first
/// address with a route (`DatagramEstablishment`), a listener is a `UDPServerGroup` that makes a
/// connection for each new remote address; at the listener's limit, a new address takes the
/// place of the oldest peer that has not yet answered a datagram sent to it.
/// Makes the datagram layer of a UDP connection's channel, on the connection's loop.
typealias DatagramLayerMaker = @Sendable (ConnectionCore) -> any DatagramLayer

extension UDP: StackBinding {
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        ConnectionCore(datagramsOn: loop, endpointDescription: endpointDescription)
    }

    func startClient(_ start: ClientStart) throws {
        try startClient(start, layer: nil)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try await startListener(listener, layer: nil)
    }

    /// `layer`: what runs in each connection's channel between the socket and its messages (a
    /// custom framer's layer), made on the connection's loop; nil: datagrams as they are.
    func startClient(_ start: ClientStart, layer: DatagramLayerMaker?) throws {
        try start.requireNoMultipath(on: "UDP connections")
        try validateForDatagrams()
        let sockets = try start.datagramSockets()
        start.begin { core in
            if let layer { core.datagram.layer = layer(core) }
            return DatagramEstablishment(core: core, udp: self, sockets: sockets)
        }
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>, layer: DatagramLayerMaker?) async throws -> any ListenerGroup {
        try validateForDatagrams()
        try listener.requireNoLocalEndpoint()
        try listener.requireNoMultipath(on: "UDP listeners")
        if let path = listener.unixPath, listener.parameters.requiredInterface != nil {
            throw NetworkError.invalidConfiguration("requiredInterface on a Unix-domain listener (\(path)): remove it")
        }
        let stack = listener.stack, intake = listener.intake
        // A Unix-domain listener's connections are known by its socket file.
        let unixEndpoint = listener.unixPath.map { NWEndpoint.unix(path: $0.path) }
        let admission = ConnectionAdmission(limit: listener.newConnectionLimit)
        let budget = listener.bufferBudget
        return try await UDPServerGroup.start(
            loops: listener.loops(serverLoops), bindTo: listener.address, unixPath: listener.unixPath, batching: batching,
            idleTimeout: inboundIdleTimeout, peersNeedProof: true,
            sockets: try listener.datagramSockets(), budget: budget
        ) { _ in
            { _, metadata, demultiplexer, context in
                // Each datagram of a new peer dropped at a limit counts as a refusal (the
                // listener's metrics): UDP has no way to tell the peer.
                guard !budget.isExhausted else {
                    budget.noteRefused()
                    return nil
                }
                // Full: the oldest peer on this loop that has not proven its address makes room
                // (a flood of forged one-datagram peers cannot keep a place from a real one).
                guard admission.admit() || (demultiplexer.displaceUnprovenPeer(context) && admission.admit()) else {
                    budget.noteRefused()
                    return nil
                }
                let peer = unixEndpoint ?? NWEndpoint(metadata.remote)
                // Once `run` is cancelled, a new peer's datagrams are dropped, as at the limit.
                let admitted = intake.admit {
                    let core = ConnectionCore(datagramsOn: context.loop, endpointDescription: peer.description)
                    core.whenEnded = { admission.release() }
                    if let layer { core.datagram.layer = layer(core) }
                    core.shared.states.update(.preparing)
                    return NetworkConnection(inbound: peer, stack: stack, core: LoopBound(core, on: context.loop), shared: core.shared)
                }
                guard let admitted else {
                    admission.release()
                    return nil
                }
                return admitted.core.value.datagram
            }
        }
    }
}
