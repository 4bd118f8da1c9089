/// Bytes handed to a stream, copied once into memory that never moves: an engine keeps
/// pointers into them until the peer acknowledges them (ngtcp2 does; a Swift array's storage
/// may be copied by the optimizer). Made where the application calls `send`, then passed down
/// as is. Sendable because the bytes are written only by `init` and read-only afterwards.
///
/// Received bytes use the same memory (`init(capacity:)`): one producer fills it in order, and
/// each run is read only after the producer has published it under a lock and never writes it
/// again (see `InboxWriter`), so readers and the producer never touch the same bytes at once.
///
/// Sends of 16 KiB and more take their memory from `StreamBlockPool`: a bulk sender's 64 KiB
/// sends would otherwise each get fresh pages from the allocator (glibc gives freed blocks of
/// that size back to the kernel), and the page faults cost a fifth of a TLS sender's CPU.
public final class StreamBytes: @unchecked Sendable {
    package let base: UnsafeMutableRawBufferPointer
    /// The pool block `base` lies in, with its size class (nil: allocated on its own).
    private let block: (pointer: UnsafeMutableRawPointer, sizeClass: Int)?

    public convenience init<Bytes: Collection>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        self.init(count: bytes.count) { $0.copyCollection(bytes) }
    }

    /// `count` bytes that `initialize` writes (all of them) before anyone else sees them: a
    /// framer's header and payload in one piece.
    package init(count: Int, initializingWith initialize: (UnsafeMutableRawBufferPointer) -> Void) {
        if let block = StreamBlockPool.take(count) {
            self.block = block
            base = UnsafeMutableRawBufferPointer(start: block.pointer, count: count)
        } else {
            block = nil
            base = .allocate(byteCount: count, alignment: 1)
        }
        initialize(base)
    }

    /// `capacity` bytes of memory to be written later, by one producer, as above.
    package convenience init(capacity: Int) {
        self.init(count: capacity) { _ in }
    }

    public var count: Int { base.count }

    deinit {
        if let block {
            StreamBlockPool.give(block)
        } else {
            base.deallocate()
        }
    }
}

/// Blocks for `StreamBytes` of 16 KiB to 1 MiB, in power-of-two size classes, kept for reuse
/// once their bytes are sent: at most `blocksPerClass` per class (a few MiB in all). Blocks
/// are made on the sender's thread and given back on the loop's, so the pool is shared, behind
/// a lock held only to push or pop a pointer. Hand-written: none of the packages here pools
/// raw memory across threads.
package enum StreamBlockPool {
    /// The smallest pooled size; smaller sends use the allocator, which serves them well.
    package static let smallestClass = 14  // 16 KiB
    package static let largestClass = 20  // 1 MiB
    /// Blocks kept per size class.
    package static let blocksPerClass = 8

    /// Kept blocks by size class, as addresses (plain integers cross the lock without
    /// ownership questions; a kept block belongs to nobody until taken).
    private static let free = Locked<[[UInt]]>(Array(repeating: [], count: largestClass - smallestClass + 1))

    /// The size class (log2 of the block size) that fits `count` bytes, nil if none is pooled.
    package static func sizeClass(for count: Int) -> Int? {
        guard count >= 1 << smallestClass, count <= 1 << largestClass else { return nil }
        let exponent = Int.bitWidth - (count - 1).leadingZeroBitCount
        return max(exponent, smallestClass)
    }

    /// A block for `count` bytes: a kept one, or a new one; nil when `count` is not pooled.
    static func take(_ count: Int) -> (pointer: UnsafeMutableRawPointer, sizeClass: Int)? {
        guard let sizeClass = sizeClass(for: count) else { return nil }
        let kept = free.withLock { $0[sizeClass - smallestClass].popLast() }.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
        let pointer = kept ?? UnsafeMutableRawPointer.allocate(byteCount: 1 << sizeClass, alignment: 16)
        return (pointer, sizeClass)
    }

    /// Keeps `block` for the next send of its class, or frees it when the class is full.
    static func give(_ block: (pointer: UnsafeMutableRawPointer, sizeClass: Int)) {
        let address = UInt(bitPattern: block.pointer), index = block.sizeClass - smallestClass
        let kept = free.withLock { free in
            guard free[index].count < blocksPerClass else { return false }
            free[index].append(address)
            return true
        }
        if !kept { block.pointer.deallocate() }
    }

    /// Blocks kept now, for tests.
    package static var keptBlocks: Int { free.withLock { $0.reduce(0) { $0 + $1.count } } }
}
