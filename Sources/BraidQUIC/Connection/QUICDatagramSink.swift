/// Where received RFC 9221 datagrams go in place of `datagramReceived` events: the owner
/// installs one (`QUICConnection.datagramSink`) so each datagram's bytes are copied once, from
/// ngtcp2's decrypted packet straight into what the application reads, with no event of its own.
///
/// The engine calls it inside its receive, on the owner's thread, from ngtcp2's callback: an
/// implementation copies and keeps the datagram aside, and hands what it kept to its readers
/// when the owner hears `datagramsReceived`, which the engine raises once for all the datagrams
/// the sink took until the owner polls that event (one hand-off per receive batch, not one
/// per datagram).
package protocol QUICDatagramSink: AnyObject {
    /// One datagram's payload, whole; valid only during the call. `early`: it came in 0-RTT.
    func receive(_ bytes: UnsafeRawBufferPointer, early: Bool)
}

/// A datagram to send, held by the engine as it is until written into a packet (no copy on
/// the way in): `[UInt8]` conforms here, and the datapath's `Data` where it queues datagrams.
package protocol QUICDatagramPayload: Sendable {
    /// The payload's size in bytes.
    var count: Int { get }
    /// Calls `body` with the payload's bytes, contiguous.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: QUICDatagramPayload where Element == UInt8 {}
