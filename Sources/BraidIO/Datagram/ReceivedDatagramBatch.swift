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
/// A block at most half full is shrunk to the bytes it holds before its datagrams are handed
/// out, and freed when the last of them is released; a fuller one stays whole and goes back to
/// `ReceivedBlockPool` for the next reads (a freshly allocated block costs a page fault per
/// page: glibc gives freed blocks back to the system). Either way a datagram the application
/// keeps holds at most twice its read's bytes, and the inbox's bound on datagrams bounds the
/// memory they hold.
struct ReceivedDatagramBatch {
    static let blockBytes = ReceivedBytes.blockBytes

    /// The block being filled (nil: none yet, or the last was sealed).
    private var block: ReceivedBytes?
    private var used = 0
    /// The datagrams appended, in arrival order, each made as it is appended with its place in
    /// its block (handed to the inbox whole, see `deliver`). A datagram refers to its block and
    /// an offset, not an address: sealing may move the block.
    private var made = Deque<ReceivedDatagram>()

    var isEmpty: Bool { made.isEmpty }

    /// Copies one datagram in.
    mutating func append(_ bytes: UnsafeRawBufferPointer, metadata: DatagramMetadata) {
        guard let source = bytes.baseAddress, bytes.count > 0 else {
            made.append(ReceivedDatagram(emptyWith: metadata))
            return
        }
        if block == nil || bytes.count > block!.capacity - used {
            seal()
            block = ReceivedBytes(capacity: max(Self.blockBytes, bytes.count))
        }
        guard let block else { return }
        (block.base + used).copyMemory(from: source, byteCount: bytes.count)
        made.append(ReceivedDatagram(block: block, offset: used, count: bytes.count, metadata: metadata))
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
        made.removeAll()
        block = nil
        used = 0
    }

    /// The block being filled takes no more datagrams: it is sized to what it holds (see
    /// `ReceivedBytes.seal`) before any of them is handed out.
    private mutating func seal() {
        guard let block else { return }
        block.seal(used: used)
        self.block = nil
        used = 0
    }
}

/// One block of received datagrams' bytes, freed (or given back to `ReceivedBlockPool`) when
/// the last reference goes (a datagram's, or a `Data`'s made from one).
/// Unchecked: the block is written and resized only on its channel's loop before any datagram
/// refers to it, and only read after.
package final class ReceivedBytes: @unchecked Sendable {
    /// A block's usual size: dozens of datagrams of a usual size, below glibc's threshold for
    /// serving an allocation with a mapping of its own (page faults on every use).
    package static let blockBytes = 64 * 1024

    package private(set) var base: UnsafeMutableRawPointer
    package private(set) var capacity: Int
    /// A whole block of `ReceivedDatagramBatch.blockBytes`: it goes back to the pool when released.
    private var recyclable: Bool

    package init(capacity: Int) {
        recyclable = capacity == ReceivedDatagramBatch.blockBytes
        if recyclable, let kept = ReceivedBlockPool.take() {
            base = kept
        } else {
            guard let base = malloc(capacity) else { fatalError("out of memory for \(capacity) bytes of received datagrams") }
            self.base = base
        }
        self.capacity = capacity
    }

    /// The block holds its datagrams' `used` bytes: at most half full, it gives back what is
    /// beyond them (glibc shrinks a block in place; `base` follows it if it moves anyway) and
    /// is freed when released; fuller, it stays whole for the pool.
    package func seal(used: Int) {
        guard used > 0, used <= capacity / 2, let shrunk = realloc(base, used) else { return }
        base = shrunk
        capacity = used
        recyclable = false
    }

    @inline(never) package func keepAlive() {}

    deinit {
        if recyclable && ReceivedBlockPool.give(base) { return }
        free(base)
    }
}

/// Whole blocks of received datagrams' bytes whose datagrams were all released, for the next
/// reads of any loop: a loop takes back the blocks its readers release instead of faulting in
/// fresh pages for each. Holds at most `limit` blocks (4 MiB, about what one connection's
/// inbox backlog of 1,200-byte datagrams spans: a reader that lags holds that many in flight);
/// beyond, a released block is freed. A listener's heap trim empties it (`drain`).
enum ReceivedBlockPool {
    static let limit = 64
    /// The blocks' addresses (as integers: a pointer is not `Sendable`); each is owned by the
    /// pool until taken.
    private static let free = Locked<[UInt]>([])

    static func take() -> UnsafeMutableRawPointer? {
        free.withLock { $0.popLast() }.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
    }

    /// Frees every block kept (before the heap is trimmed: a flood's blocks go back too).
    static func drain() {
        let kept = free.withLock { free in
            defer { free.removeAll() }
            return free
        }
        for address in kept { Glibc.free(UnsafeMutableRawPointer(bitPattern: address)) }
    }

    /// Keeps `base` (a whole block) for the next reads; false when the pool is full.
    static func give(_ base: UnsafeMutableRawPointer) -> Bool {
        free.withLock { free in
            guard free.count < limit else { return false }
            free.append(UInt(bitPattern: base))
            return true
        }
    }
}
