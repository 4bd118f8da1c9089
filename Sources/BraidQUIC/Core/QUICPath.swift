/// The 4-tuple a packet travels on: our address and the peer's.
public struct QUICPath: Hashable, Sendable, CustomStringConvertible {
    public var local: QUICAddress
    public var remote: QUICAddress

    public init(local: QUICAddress, remote: QUICAddress) {
        self.local = local
        self.remote = remote
    }

    public var description: String { "\(local) <-> \(remote)" }
}
