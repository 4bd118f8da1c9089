import Glibc

/// Bytes in flight between the socket and GnuTLS: written at the tail, consumed at the head, in
/// memory that never moves while a caller holds a pointer into it.
///
/// The buffer holds memory only while it holds bytes: it takes a block of `blockCapacity` bytes
/// when bytes arrive and gives it back the moment it is empty again, so an idle connection (and
/// one waiting for its peer mid-handshake) holds none. Given-back blocks go to a small cache per
/// thread (`CiphertextBlockCache`), where the next buffer that needs one on that thread, this
/// one on the next pass of a bulk transfer or the next connection's handshake, takes it again
/// without calling malloc or touching new pages. The input buffer never holds more than its
/// block; the output buffer grows past it only for a burst larger than the block (and frees that
/// larger storage when it drains).
final class CiphertextBuffer {
    /// nil while the buffer is empty.
    private(set) var storage: UnsafeMutableRawPointer?
    /// Size of `storage` (0 without storage).
    private(set) var capacity = 0
    /// The size of the block taken when bytes arrive.
    let blockCapacity: Int
    private var head = 0
    private var tail = 0
    /// Bytes ever consumed: GnuTLS made progress if this moved during a call.
    private(set) var totalConsumed = 0

    init(blockCapacity: Int) {
        self.blockCapacity = blockCapacity
    }

    // Freed directly, not cached: a connection may end on any thread.
    deinit { storage?.deallocate() }

    /// Bytes written and not yet consumed.
    var count: Int { tail - head }

    /// Whether the buffer holds memory (for tests).
    var holdsStorage: Bool { storage != nil }

    /// The unconsumed bytes.
    var readable: UnsafeRawBufferPointer {
        guard let storage else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: storage + head, count: tail - head)
    }

    /// Free space at the tail after moving unconsumed bytes to the front if that makes `minimum`
    /// fit; may be smaller than `minimum` when the buffer is that full. Takes a block if the
    /// buffer has none; follow with `commitWrite` (0 gives an empty buffer's block back).
    func writableSpace(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if storage == nil { takeBlock() }
        if capacity - tail < minimum && head > 0 { compact() }
        return UnsafeMutableRawBufferPointer(start: storage! + tail, count: capacity - tail)
    }

    /// Marks `count` bytes after the tail as written.
    func commitWrite(_ count: Int) {
        precondition(count >= 0 && count <= capacity - tail, "wrote \(count) bytes into \(capacity - tail) bytes of space")
        tail += count
        if head == tail { giveBack() }
    }

    /// Appends `bytes`, taking a block or growing the storage if needed.
    func append(_ bytes: UnsafeRawPointer, count: Int) {
        guard count > 0 else { return }
        if storage == nil {
            if count <= blockCapacity { takeBlock() } else { allocate(capacity: Self.grown(blockCapacity, toFit: count)) }
        }
        if capacity - tail < count {
            if head > 0 { compact() }
            if capacity - tail < count { grow(toFit: tail + count) }
        }
        (storage! + tail).copyMemory(from: bytes, byteCount: count)
        tail += count
    }

    /// Copies up to `count` bytes into `destination` and consumes them; returns how many.
    func read(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        let n = min(count, tail - head)
        guard n > 0 else { return 0 }
        destination.copyMemory(from: storage! + head, byteCount: n)
        consume(n)
        return n
    }

    /// Drops `count` bytes from the head; an emptied buffer gives its memory back.
    func consume(_ count: Int) {
        precondition(count >= 0 && count <= tail - head, "consumed \(count) of \(tail - head) bytes")
        head += count
        totalConsumed += count
        if head == tail { giveBack() }
    }

    /// Gives the memory of an empty buffer back (after a `writableSpace` nothing was written to).
    func releaseIfEmpty() {
        if head == tail { giveBack() }
    }

    private func takeBlock() {
        if let block = CiphertextBlockCache.current.take(capacity: blockCapacity) {
            storage = block
            capacity = blockCapacity
        } else {
            allocate(capacity: blockCapacity)
        }
    }

    private func allocate(capacity: Int) {
        storage = .allocate(byteCount: capacity, alignment: 16)
        self.capacity = capacity
    }

    private func giveBack() {
        head = 0
        tail = 0
        guard let storage else { return }
        if capacity != blockCapacity || !CiphertextBlockCache.current.put(storage, capacity: capacity) {
            storage.deallocate()
        }
        self.storage = nil
        capacity = 0
    }

    private func compact() {
        let n = tail - head
        storage!.copyMemory(from: storage! + head, byteCount: n)
        head = 0
        tail = n
    }

    private static func grown(_ capacity: Int, toFit needed: Int) -> Int {
        var newCapacity = max(capacity, 1)
        while newCapacity < needed { newCapacity *= 2 }
        return newCapacity
    }

    private func grow(toFit needed: Int) {
        let newCapacity = Self.grown(capacity, toFit: needed)
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage! + head, byteCount: tail - head)
        if capacity != blockCapacity || !CiphertextBlockCache.current.put(storage!, capacity: capacity) {
            storage!.deallocate()
        }
        storage = newStorage
        tail -= head
        head = 0
        capacity = newCapacity
    }
}

/// The blocks emptied ciphertext buffers gave back on one thread, at most `perCapacity` of each
/// size (two sizes in use: the input and output blocks), so a thread keeps at most a few hundred
/// KiB however many connections it serves. Reached through a pthread key: only its own thread
/// touches it; a thread that ends frees its blocks.
final class CiphertextBlockCache {
    static let perCapacity = 2
    private var blocks: [(pointer: UnsafeMutableRawPointer, capacity: Int)] = []

    init() { blocks.reserveCapacity(4 * Self.perCapacity) }

    deinit { for block in blocks { block.pointer.deallocate() } }

    /// This thread's cache, made on first use.
    static var current: CiphertextBlockCache {
        if let pointer = pthread_getspecific(blockCacheKey) {
            return Unmanaged<CiphertextBlockCache>.fromOpaque(pointer).takeUnretainedValue()
        }
        let cache = CiphertextBlockCache()
        pthread_setspecific(blockCacheKey, Unmanaged.passRetained(cache).toOpaque())
        return cache
    }

    func take(capacity: Int) -> UnsafeMutableRawPointer? {
        guard let index = blocks.lastIndex(where: { $0.capacity == capacity }) else { return nil }
        return blocks.remove(at: index).pointer
    }

    /// Keeps `pointer` unless this thread already keeps enough of its size; false: free it.
    func put(_ pointer: UnsafeMutableRawPointer, capacity: Int) -> Bool {
        var same = 0
        for block in blocks where block.capacity == capacity { same += 1 }
        guard same < Self.perCapacity else { return false }
        blocks.append((pointer, capacity))
        return true
    }
}

/// The key of each thread's `CiphertextBlockCache`; its destructor releases the cache when the
/// thread ends.
private let blockCacheKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key) { pointer in
        guard let pointer else { return }
        Unmanaged<CiphertextBlockCache>.fromOpaque(pointer).release()
    }
    precondition(rc == 0, "pthread_key_create failed: \(rc)")
    return key
}()
