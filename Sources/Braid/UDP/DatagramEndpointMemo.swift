import BraidCore
import BraidIO

/// The `UDP.Metadata` endpoints of the datagram last received, so a run of datagrams between
/// the same two addresses (every datagram of a connected UDP connection) builds its
/// `NWEndpoint`s once: building one formats the address as text, which cost more per datagram
/// than the rest of receiving it.
struct DatagramEndpointMemo {
    private var last: (remote: SocketAddress, local: SocketAddress, endpoints: (remote: NWEndpoint, local: NWEndpoint))?
    /// A Unix-domain connection's endpoint: both ends of its datagrams (its socket's addresses
    /// are stand-ins).
    var unixEndpoint: NWEndpoint?

    mutating func metadata(for datagram: ReceivedDatagram) -> UDP.Metadata {
        let remote = datagram.metadata.remote, local = datagram.metadata.local
        let endpoints: (remote: NWEndpoint, local: NWEndpoint)
        if let unixEndpoint {
            endpoints = (unixEndpoint, unixEndpoint)
        } else if let last, last.remote == remote, last.local == local {
            endpoints = last.endpoints
        } else {
            endpoints = (NWEndpoint(remote), NWEndpoint(local))
            last = (remote, local, endpoints)
        }
        return UDP.Metadata(ecn: datagram.metadata.ecn, remoteEndpoint: endpoints.remote, localEndpoint: endpoints.local)
    }
}
