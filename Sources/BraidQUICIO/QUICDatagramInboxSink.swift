import BraidIO
import BraidQUIC
import DequeModule
import Foundation

/// A QUIC channel's datagram sink: the engine's callback copies each received datagram once,
/// from the decrypted packet into the `Data` its reader gets, and keeps it here; on
/// `datagramsReceived` (once per receive batch) the channel hands them all to the inbox in one
/// lock round with at most one wake-up (`MessageInbox.deliver(moving:)`, which takes the
/// deque's storage whole when the reader has caught up).
///
/// What waits here is bounded by one receive batch (the driver polls the engine's events after
/// each), and the inbox's backlog bounds what waits there. Held by the engine and by the
/// channel; loop-only, like both.
final class QUICDatagramInboxSink: QUICDatagramSink {
    let inbox: DatagramInbox
    private var received = Deque<Data>()

    init(inbox: DatagramInbox) {
        self.inbox = inbox
    }

    func receive(_ bytes: UnsafeRawBufferPointer, early: Bool) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            received.append(Data())
            return
        }
        received.append(Data(bytes: base, count: bytes.count))
    }

    /// Hands what the engine gave since the last call to the inbox.
    func deliver() {
        inbox.deliver(moving: &received)
    }
}

/// A datagram the application sent, as the engine holds it until written into a packet: the
/// sender's `Data` itself, not a copy.
struct SentDatagram: QUICDatagramPayload {
    let bytes: Data

    var count: Int { bytes.count }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }
}
