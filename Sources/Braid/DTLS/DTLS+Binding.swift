import BraidIO
import BraidTLS
import BraidTLSIO

/// DTLS is UDP's binding with a DTLS layer in each connection's `DatagramChannel`: the channel
/// is ready when the handshake completes.
extension DTLS: StackBinding {
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        ConnectionCore(datagramsOn: loop, endpointDescription: endpointDescription)
    }

    func startClient(_ start: ClientStart) throws {
        try start.requireNoMultipath(on: "DTLS connections")
        try udp.validateForDatagrams()
        let context = try DTLSClientContexts.context(for: self)
        let serverName = serverName ?? start.endpoint.host.description
        let mtu = maximumDatagramSize
        // Made here, so a name GnuTLS refuses fails the start instead of the first datagram;
        // handed over to the loop, which alone touches it from then on.
        nonisolated(unsafe) let engine = try DTLSConnection.client(context: context, serverName: serverName, mtu: mtu)
        let sockets = try start.datagramSockets()
        let udp = udp, judge = peerVerifier?.judge, handshakeTimeout = handshakeTimeout
        start.begin { core in
            let layer = DTLSLayer(engine, handshakeTimeout: handshakeTimeout)
            layer.peerJudge = judge
            core.datagram.layer = layer
            return DatagramEstablishment(core: core, udp: udp, sockets: sockets)
        }
    }

    /// UDP's server group, with the cookie exchange in front of its admission: a new address
    /// gets a channel (and costs state) only once its ClientHello carries a cookie made for it.
    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try udp.validateForDatagrams()
        try listener.requireNoLocalEndpoint()
        try listener.requireNoMultipath(on: "DTLS listeners")
        if listener.unixPath != nil { throw NetworkError.unsupported("DTLS listeners on Unix-domain sockets") }
        let context = try DTLSServerContext(configuration: try serverConfiguration())
        let stack = listener.stack, intake = listener.intake, mtu = maximumDatagramSize, handshakeTimeout = handshakeTimeout
        let judge = peerVerifier?.judge
        let admission = ConnectionAdmission(limit: listener.newConnectionLimit)
        let budget = listener.bufferBudget
        return try await UDPServerGroup.start(
            loops: listener.loops(udp.serverLoops), bindTo: listener.address, batching: udp.batching,
            idleTimeout: udp.inboundIdleTimeout, sockets: try listener.datagramSockets(), budget: budget
        ) { _ in
            { datagram, metadata, demultiplexer, loopContext in
                let cookie: DTLSCookieCheck.Verified
                switch context.checkCookie(in: datagram, from: Array(metadata.remote.description.utf8)) {
                case .drop: return nil
                case .reply(let verifyRequest):
                    demultiplexer.reply(verifyRequest, to: metadata)
                    return nil
                case .verified(let verified): cookie = verified
                }
                // A refused ClientHello (its cookie verified) counts as a refusal in the listener's
                // metrics; the client's retransmissions count again, and its handshake times out.
                guard !budget.isExhausted, admission.admit() else {
                    budget.noteRefused()
                    return nil
                }
                guard let engine = try? DTLSConnection.server(context: context, cookie: cookie, mtu: mtu) else {
                    admission.release()
                    return nil
                }
                let peer = NWEndpoint(metadata.remote)
                let admitted = intake.admit {
                    let core = ConnectionCore(datagramsOn: loopContext.loop, endpointDescription: peer.description)
                    core.whenEnded = { admission.release() }
                    let layer = DTLSLayer(engine, handshakeTimeout: handshakeTimeout)
                    layer.peerJudge = judge
                    core.datagram.layer = layer
                    core.shared.states.update(.preparing)
                    return NetworkConnection(inbound: peer, stack: stack, core: LoopBound(core, on: loopContext.loop), shared: core.shared)
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
