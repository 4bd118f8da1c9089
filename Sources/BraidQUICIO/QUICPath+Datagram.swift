import BraidIO
import BraidQUIC

// The adapter between the datapath's vocabulary and the QUIC engine's: a datagram's metadata
// is the engine's path plus its ECN mark. Both sides are plain structs of the same addresses,
// so converting copies 60 bytes and allocates nothing.

extension QUICPath {
    /// The path a received datagram travelled on.
    init(_ metadata: DatagramMetadata) {
        self.init(local: metadata.local, remote: metadata.remote)
    }
}

extension DatagramMetadata {
    /// How to send a batch the engine wrote for `path`.
    init(_ path: QUICPath, ecn: ECN) {
        self.init(remote: path.remote, local: path.local, ecn: ecn)
    }
}
