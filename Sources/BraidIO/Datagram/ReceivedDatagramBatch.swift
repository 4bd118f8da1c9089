import DequeModule
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The datagrams of one socket read on their way to the inbox. Their bytes are copied out of the
/// socket's receive area into blocks of `blockBytes`, one allocation for many datagrams, and
/// each datagram refers to its bytes in its block (its `Data` is made when read, see
/// `ReceivedDatagram`): a `Data` owning a copy of its own cost an allocation of its bytes, and
/// their release, per datagram. Each such `Data` starts at index 0 and holds the datagram's
/// bytes alone, as any other.
///
/// A block is shrunk to the bytes it holds before its datagrams are handed out, and freed when
/// the last of them is released: a datagram the application keeps holds at most its read's
/// bytes, and the inbox's bound on datagrams bounds the memory they hold.
struct ReceivedDatagramBatch {
    static let blockBytes = ReceivedBytes.blockBytes

    /// The block being filled (nil: none yet, or the last was handed out).
    private var block: ReceivedBytes?
    private var used = 0
    /// The datagrams whose bytes are in `block`, not yet handed their share of it.
    private var pending: [(offset: Int, count: Int, metadata: DatagramMetadata)] = []
    /// The datagrams made, in arrival order (handed to the inbox whole, see `deliver`).
    private var made = Deque<ReceivedDatagram>()

    var isEmpty: Bool { pending.isEmpty && made.isEmpty }

    /// Copies one datagram in.
    mutating func append(_ bytes: UnsafeRawBufferPointer, metadata: DatagramMetadata) {
        if block == nil || bytes.count > block!.capacity - used {
            seal()
            if block == nil || bytes.count > block!.capacity {
                block = ReceivedBytes(capacity: max(Self.blockBytes, bytes.count))
            }
        }
        if let source = bytes.baseAddress, bytes.count > 0 { (block!.base + used).copyMemory(from: source, byteCount: bytes.count) }
        pending.append((used, bytes.count, metadata))
        used += bytes.count
    }

    /// Hands every datagram appended so far to `inbox` in one delivery.
    mutating func deliver(to inbox: MessageInbox<ReceivedDatagram>) {
        seal()
        guard !made.isEmpty else { return }
        inbox.deliver(moving: &made)
    }

    /// Drops what was not delivered and the block being filled.
    mutating func release() {
        pending.removeAll()
        made.removeAll()
        block = nil
        used = 0
    }

    /// Hands the pending datagrams their places in the block, which then belongs to them.
    private mutating func seal() {
        guard let block, !pending.isEmpty else { return }
        guard used > 0 else {
            // Empty datagrams only: nothing of the block is theirs.
            for datagram in pending { made.append(ReceivedDatagram(content: Data(), metadata: datagram.metadata)) }
            pending.removeAll(keepingCapacity: true)
            return
        }
        block.shrink(to: used)
        for index in pending.indices {
            made.append(
                ReceivedDatagram(block: block, offset: pending[index].offset, count: pending[index].count, metadata: pending[index].metadata))
        }
        pending.removeAll(keepingCapacity: true)
        self.block = nil
        used = 0
    }
}

/// One block of received datagrams' bytes, freed when the last reference goes (a datagram's,
/// or a `Data`'s made from one).
/// Unchecked: the block is written and resized only on its channel's loop before any datagram
/// refers to it, and only read after.
package final class ReceivedBytes: @unchecked Sendable {
    /// A block's usual size: dozens of datagrams of a usual size, below glibc's threshold for
    /// serving an allocation with a mapping of its own (page faults on every use).
    package static let blockBytes = 64 * 1024

    package private(set) var base: UnsafeMutableRawPointer
    package private(set) var capacity: Int

    package init(capacity: Int) {
        guard let base = malloc(capacity) else { fatalError("out of memory for \(capacity) bytes of received datagrams") }
        self.base = base
        self.capacity = capacity
    }

    /// Gives back what is beyond `size` (glibc shrinks a block in place; `base` follows it if
    /// it moves anyway).
    package func shrink(to size: Int) {
        guard size > 0, size < capacity, let shrunk = realloc(base, size) else { return }
        base = shrunk
        capacity = size
    }

    @inline(never) package func keepAlive() {}

    deinit {
        free(base)
    }
}
