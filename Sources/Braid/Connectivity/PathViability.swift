import BraidIO

/// Whether a connection's path can carry its packets now, from the kernel's interfaces: the
/// link that holds the connection's local address is up and running (carrier). A path that
/// went away is not viable; the connection is not torn down, and becomes viable again when the
/// link returns (Apple's advice: do not tear a connection down on viability loss).
enum PathViability {
    /// `local`'s address is on an interface that is up and running; a loopback address needs
    /// `lo` up.
    static func isViable(local: SocketAddress, in snapshot: InterfaceSnapshot) -> Bool {
        let bytes = InterfaceConstraints.bytes(of: local)
        return snapshot.interfaces.contains { interface in
            guard interface.link.isUp else { return false }
            if interface.kind == .loopback { return InterfaceConstraints.isLoopback(bytes) || interface.addresses.contains { $0.bytes == bytes } }
            return interface.link.isRunning && interface.addresses.contains { $0.bytes == bytes }
        }
    }
}
