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
        let udp = udp
        start.begin { core in
            core.datagram.layer = DTLSLayer(engine)
            return DatagramEstablishment(core: core, udp: udp, sockets: sockets)
        }
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        throw NetworkError.unsupported("DTLS listeners (NetworkListener { DTLS { UDP() } }); DTLS clients are supported")
    }
}
