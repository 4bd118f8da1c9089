/// The 4-tuple a packet travels on: our address and the peer's.
package struct QUICPath: Hashable, Sendable, CustomStringConvertible {
    package var local: QUICAddress
    package var remote: QUICAddress

    package init(local: QUICAddress, remote: QUICAddress) {
        self.local = local
        self.remote = remote
    }

    package var description: String { "\(local) <-> \(remote)" }
}
