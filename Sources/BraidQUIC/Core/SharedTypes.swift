@_exported import BraidCore
// The TLS names QUIC's API speaks (trust roots, certificate verification and problems, pins)
// live in BraidTLS, shared with TLS over TCP; re-exported so `import BraidQUIC` code sees them.
@_exported import BraidTLS

// The engine's names for the values every layer shares (defined in BraidCore, below both
// the engines and the datapath, so neither imports the other to speak of addresses or time).

/// An IPv4 or IPv6 address with a port (`SocketAddress`).
package typealias QUICAddress = SocketAddress

/// A point in time on the owner's monotonic clock (`MonotonicInstant`).
package typealias QUICInstant = MonotonicInstant

extension Duration {
    init(ngtcp2Duration: UInt64) { self = .nanoseconds(Int64(clamping: ngtcp2Duration)) }
}
