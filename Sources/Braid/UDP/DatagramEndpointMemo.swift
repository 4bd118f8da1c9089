import BraidCore
import BraidIO

/// The `UDP.Metadata` endpoints of the datagram last received, so a run of datagrams between
/// the same two addresses (every datagram of a connected UDP connection) builds its
/// `NWEndpoint`s once: building one formats the address as text, which cost more per datagram
/// than the rest of receiving it.
///
/// A class, so that an iterator's closures share one without capturing a `var` (each access
/// to a captured `var` made a run-time exclusivity check). Used by one reader at a time: an
/// iterator's, or `receive()`'s under its lock; no access to its fields spans another, so
/// they skip the run-time check.
final class DatagramEndpointMemo {
    @exclusivity(unchecked) private var last: (remote: SocketAddress, local: SocketAddress, endpoints: (remote: NWEndpoint, local: NWEndpoint))?
    /// A Unix-domain connection's endpoint: both ends of its datagrams (its socket's addresses
    /// are stand-ins).
    @exclusivity(unchecked) var unixEndpoint: NWEndpoint?

    func metadata(for datagram: ReceivedDatagram) -> UDP.Metadata {
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
