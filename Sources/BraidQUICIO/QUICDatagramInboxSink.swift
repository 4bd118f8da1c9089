import BraidIO
import BraidQUIC
import DequeModule
import Foundation

/// A QUIC channel's datagram sink: the engine's callback copies each received datagram once,
/// from the decrypted packet into a block shared by the datagrams of its receive batch
/// (`ReceivedBytes`, as UDP's `ReceivedDatagramBatch` does), and on `datagramsReceived` (once per
/// receive batch) the channel hands them all to the inbox in one lock round with at most one
/// wake-up (`MessageInbox.deliver(moving:)`, which takes the deque's storage whole when the
/// reader has caught up). Each datagram's `Data` refers to its bytes in the block: no
/// allocation of its own bytes, nor their release, per datagram. A block is sealed when handed
/// out (`ReceivedBytes.seal`: at most half full it is shrunk, else it goes back to the received
/// blocks' pool with the last of its datagrams).
///
/// What waits here is bounded by one receive batch (the driver polls the engine's events after
/// each), and the inbox's backlog bounds what waits there. Held by the engine and by the
/// channel; loop-only, like both.
final class QUICDatagramInboxSink: QUICDatagramSink {
    let inbox: DatagramInbox
    private var received = Deque<Data>()
    /// The block being filled (nil: none yet, or the last was handed out), its bytes in use,
    /// and where the datagrams copied into it since lie.
    private var block: ReceivedBytes?
    private var used = 0
    private var pending: [(offset: Int, count: Int)] = []

    init(inbox: DatagramInbox) {
        self.inbox = inbox
    }

    func receive(_ bytes: UnsafeRawBufferPointer, early: Bool) {
        guard let source = bytes.baseAddress, bytes.count > 0 else {
            // In order: what is in the block goes first.
            seal()
            received.append(Data())
            return
        }
        if block == nil || bytes.count > block!.capacity - used {
            seal()
            block = ReceivedBytes(capacity: max(ReceivedBytes.blockBytes, bytes.count))
        }
        (block!.base + used).copyMemory(from: source, byteCount: bytes.count)
        pending.append((used, bytes.count))
        used += bytes.count
    }

    /// Hands what the engine gave since the last call to the inbox.
    func deliver() {
        seal()
        inbox.deliver(moving: &received)
    }

    /// Makes each pending datagram's `Data` over its bytes in the block, which then belongs to
    /// them (the deallocator's reference keeps it until the last one goes).
    private func seal() {
        guard let block, !pending.isEmpty else { return }
        block.seal(used: used)
        for (offset, count) in pending {
            received.append(Data(bytesNoCopy: block.base + offset, count: count, deallocator: .custom { _, _ in block.keepAlive() }))
        }
        pending.removeAll(keepingCapacity: true)
        self.block = nil
        used = 0
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
