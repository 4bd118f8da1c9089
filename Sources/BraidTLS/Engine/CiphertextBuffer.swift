/// Bytes in flight between the socket and GnuTLS: written at the tail, consumed at the head, in
/// memory that never moves while a caller holds a pointer into it. The input buffer has a fixed
/// capacity (the caller stops reading when it is full); the output buffer grows when GnuTLS pushes
/// more than fits, and keeps its size, so a steady stream allocates nothing.
final class CiphertextBuffer {
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var capacity: Int
    private var head = 0
    private var tail = 0
    /// Bytes ever consumed: GnuTLS made progress if this moved during a call.
    private(set) var totalConsumed = 0

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Bytes written and not yet consumed.
    var count: Int { tail - head }

    /// The unconsumed bytes.
    var readable: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage + head, count: tail - head) }

    /// Free space at the tail after moving unconsumed bytes to the front if that makes `minimum`
    /// fit; may be smaller than `minimum` when the buffer is that full.
    func writableSpace(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if capacity - tail < minimum && head > 0 { compact() }
        return UnsafeMutableRawBufferPointer(start: storage + tail, count: capacity - tail)
    }

    /// Marks `count` bytes after the tail as written.
    func commitWrite(_ count: Int) {
        precondition(count >= 0 && count <= capacity - tail, "wrote \(count) bytes into \(capacity - tail) bytes of space")
        tail += count
    }

    /// Appends `bytes`, growing the storage if needed.
    func append(_ bytes: UnsafeRawPointer, count: Int) {
        if capacity - tail < count {
            if head > 0 { compact() }
            if capacity - tail < count { grow(toFit: tail + count) }
        }
        (storage + tail).copyMemory(from: bytes, byteCount: count)
        tail += count
    }

    /// Copies up to `count` bytes into `destination` and consumes them; returns how many.
    func read(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        let n = min(count, tail - head)
        destination.copyMemory(from: storage + head, byteCount: n)
        consume(n)
        return n
    }

    /// Drops `count` bytes from the head.
    func consume(_ count: Int) {
        precondition(count >= 0 && count <= tail - head, "consumed \(count) of \(tail - head) bytes")
        head += count
        totalConsumed += count
        // Empty: start over at the front, so the next write needs no compaction.
        if head == tail { head = 0; tail = 0 }
    }

    private func compact() {
        let n = tail - head
        storage.copyMemory(from: storage + head, byteCount: n)
        head = 0
        tail = n
    }

    private func grow(toFit needed: Int) {
        var newCapacity = capacity
        while newCapacity < needed { newCapacity *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage + head, byteCount: tail - head)
        storage.deallocate()
        storage = newStorage
        tail -= head
        head = 0
        capacity = newCapacity
    }
}
