import BraidIO

/// A UDP listener's sockets: one per loop, carrying its peers' channels too.
extension UDPServerGroup: ListenerGroup {
    /// Nothing to do here: the socket also carries the peers' channels, and the listener's
    /// `InboundIntake`, once closed, drops a new peer's datagrams (as at `newConnectionLimit`).
    func stopAccepting() {}
}
