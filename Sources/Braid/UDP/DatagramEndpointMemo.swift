import BraidCore
import BraidIO

/// The `UDP.Metadata` endpoints of the datagram last received, so a run of datagrams between
/// the same two addresses (every datagram of a connected UDP connection) builds its
/// `NWEndpoint`s once and shares them: building one formats the address as text, which cost
/// more per datagram than the rest of receiving it.
///
/// A class, so that an iterator's closures share one without capturing a `var` (each access
/// to a captured `var` made a run-time exclusivity check). Used by one reader at a time: an
/// iterator's, or `receive()`'s under its lock; no access to its fields spans another, so
/// they skip the run-time check.
final class DatagramEndpointMemo {
    /// The addresses `lastEndpoints` were made for (meaningless while it is nil). Kept apart
    /// from the endpoints so the comparison reads them in place, without copying an optional
    /// tuple (and retaining its endpoints) per datagram.
    @exclusivity(unchecked) private var lastRemote = SocketAddress.unspecified
    @exclusivity(unchecked) private var lastLocal = SocketAddress.unspecified
    @exclusivity(unchecked) private var lastEndpoints: UDP.MetadataEndpoints?
    /// A Unix-domain connection's endpoint: both ends of its datagrams (its socket's addresses
    /// are stand-ins).
    @exclusivity(unchecked) var unixEndpoint: NWEndpoint? {
        didSet { if unixEndpoint != oldValue { lastEndpoints = nil } }
    }

    func metadata(for datagram: ReceivedDatagram) -> UDP.Metadata {
        metadata(for: datagram.metadata)
    }

    /// Takes the addresses alone, so a caller holding a datagram need not copy it (and retain
    /// its bytes) to ask.
    func metadata(for received: DatagramMetadata) -> UDP.Metadata {
        if let lastEndpoints, lastRemote == received.remote, lastLocal == received.local {
            return UDP.Metadata(ecn: received.ecn, endpoints: lastEndpoints)
        }
        let remote = received.remote, local = received.local
        let endpoints =
            unixEndpoint.map { UDP.MetadataEndpoints(remote: $0, local: $0) }
            ?? UDP.MetadataEndpoints(remote: NWEndpoint(remote), local: NWEndpoint(local))
        lastRemote = remote
        lastLocal = local
        lastEndpoints = endpoints
        return UDP.Metadata(ecn: received.ecn, endpoints: endpoints)
    }
}
