import BraidCore
import Synchronization

/// The connections a TLS, TCP or UDP listener has open (UDP: its peers), across its loops,
/// against `newConnectionLimit`, and for TLS and TCP against the limit per client address.
final class ConnectionAdmission: Sendable {
    private let open = Atomic(0)
    let limit: Int
    /// Most connections from one client address (`SocketAddress.clientKey`); 0: no limit.
    let perAddressLimit: Int
    /// Open connections per client address, only while some are open (so the table holds no
    /// more addresses than connections).
    private let perAddress = Locked<[SocketAddress: Int]>([:])

    init(limit: Int, perAddressLimit: Int = 0) {
        self.limit = limit
        self.perAddressLimit = perAddressLimit
    }

    /// Takes a place for a new connection; false when the listener is full.
    func admit() -> Bool {
        while true {
            let current = open.load(ordering: .relaxed)
            guard current < limit else { return false }
            if open.compareExchange(expected: current, desired: current + 1, ordering: .relaxed).exchanged { return true }
        }
    }

    /// Takes a place for a new connection from `address` (already a `clientKey`): false when
    /// that address already holds `perAddressLimit` connections. Pair with
    /// `release(address:)`.
    func admit(address: SocketAddress) -> Bool {
        guard perAddressLimit > 0 else { return true }
        return perAddress.withLock { table in
            let count = table[address, default: 0]
            guard count < perAddressLimit else { return false }
            table[address] = count + 1
            return true
        }
    }

    /// A connection ended: its place is free.
    func release() {
        open.subtract(1, ordering: .relaxed)
    }

    /// A connection from `address` admitted by `admit(address:)` ended.
    func release(address: SocketAddress) {
        guard perAddressLimit > 0 else { return }
        perAddress.withLock { table in
            let count = table[address, default: 1] - 1
            table[address] = count > 0 ? count : nil
        }
    }
}
