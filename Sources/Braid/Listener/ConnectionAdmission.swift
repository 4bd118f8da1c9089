import Synchronization

/// The connections a TLS, TCP or UDP listener has open (UDP: its peers), across its loops,
/// against `newConnectionLimit`.
final class ConnectionAdmission: Sendable {
    private let open = Atomic(0)
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Takes a place for a new connection; false when the listener is full.
    func admit() -> Bool {
        while true {
            let current = open.load(ordering: .relaxed)
            guard current < limit else { return false }
            if open.compareExchange(expected: current, desired: current + 1, ordering: .relaxed).exchanged { return true }
        }
    }

    /// A connection ended: its place is free.
    func release() {
        open.subtract(1, ordering: .relaxed)
    }
}
