import CBraidLock

/// Braid's lock: a value reached only while holding a futex lock without priority
/// inheritance (`braid_lock_t`, in CBraidLock).
///
/// Not `Synchronization.Mutex`: on Linux that is a priority-inheritance futex, whose unlock
/// hands the lock to the first waiter while it is still asleep. With more runnable threads
/// than cores (a loaded server, or the test suite on 2 cores) the lock then stays owned by a
/// thread waiting for a core, and every thread that asks in the meantime queues behind it:
/// perf's sched_switch chains showed event loops asleep on one short critical section for
/// seconds per pass. Not glibc's `pthread_mutex_t` either, which sleeps at once when the lock
/// is taken: a sender task and its loop, each on a core, passing a stream's outbox back and
/// forth made 100,000 futex calls and 40,000 context switches for 400,000 messages (Mutex,
/// which spins first: about 1,000 of each). So: spin briefly like Mutex, then sleep on a
/// plain futex, whose unlock frees the lock for whichever thread runs first. Hand-written
/// because neither library lock here does both; ThreadSanitizer sees its atomics.
///
/// The lock word and the value share one allocation, made when the lock is; locking
/// allocates nothing. Debug builds stop with a message when a thread takes a lock it holds.
///
/// Same shape as `Mutex`: keep it in a `let` of a class or a global, and read or change the
/// value only inside `withLock`.
///
/// Public and `@inlinable` so that every module's critical sections compile to direct calls,
/// as `Mutex.withLock` does: this toolchain does not inline a `package` declaration into
/// another module, and called through its generic entry point each section cost runtime
/// type-metadata lookups (2% to 3% of a QUIC receiver's CPU). `Braid` does not re-export it.
public struct Locked<Value: ~Copyable>: ~Copyable {
    @usableFromInline let lock: UnsafeMutablePointer<braid_lock_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    @inlinable public init(_ initialValue: consuming sending Value) {
        let alignment = MemoryLayout<Value>.alignment
        let valueOffset = (MemoryLayout<braid_lock_t>.stride + alignment - 1) / alignment * alignment
        let block = UnsafeMutableRawPointer.allocate(
            byteCount: valueOffset + MemoryLayout<Value>.size,
            alignment: max(MemoryLayout<braid_lock_t>.alignment, alignment))
        lock = block.initializeMemory(as: braid_lock_t.self, repeating: braid_lock_t(word: 0, owner: 0), count: 1)
        value = (block + valueOffset).bindMemory(to: Value.self, capacity: 1)
        value.initialize(to: initialValue)
    }

    @inlinable deinit {
        value.deinitialize(count: 1)
        UnsafeMutableRawPointer(lock).deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    @inlinable public borrowing func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        braid_lock_acquire(lock)
        defer { braid_lock_release(lock) }
        return try body(&value.pointee)
    }
}

// The value is reached only inside `withLock`, under the lock, and is passed in and out as
// `sending`: the same reasoning as `Mutex`'s own conformance.
extension Locked: @unchecked Sendable where Value: ~Copyable {}
