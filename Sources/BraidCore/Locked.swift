#if canImport(Glibc)
import Glibc
#endif

/// Braid's lock: a value reached only under a glibc `pthread_mutex_t`.
///
/// Not `Synchronization.Mutex`: on Linux that is a priority-inheritance futex, whose unlock
/// hands the lock to the first waiter while it is still asleep. With more runnable threads
/// than cores (a loaded server, or the test suite on 2 cores) the lock then stays owned by a
/// thread waiting for a core, and every thread that asks in the meantime queues behind it:
/// perf's sched_switch chains showed event loops asleep on one short critical section for
/// seconds per pass. A glibc mutex is released outright and woken waiters compete for it
/// again, so a running thread takes it at once. ThreadSanitizer understands pthread mutexes
/// natively, which the futex never was.
///
/// The mutex and the value share one allocation, made when the lock is; locking allocates
/// nothing. Debug builds use an error-checking mutex so that taking a lock twice on one
/// thread stops with a message instead of hanging.
///
/// Same shape as `Mutex`: keep it in a `let` of a class or a global, and read or change the
/// value only inside `withLock`.
///
/// Public and `@inlinable` so that every module's critical sections compile to direct calls,
/// as `Mutex.withLock` does: this toolchain does not inline a `package` declaration into
/// another module, and called through its generic entry point each section cost runtime
/// type-metadata lookups (2% to 3% of a QUIC receiver's CPU). `Braid` does not re-export it.
public struct Locked<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    @inlinable public init(_ initialValue: consuming sending Value) {
        let alignment = MemoryLayout<Value>.alignment
        let valueOffset = (MemoryLayout<pthread_mutex_t>.stride + alignment - 1) / alignment * alignment
        let block = UnsafeMutableRawPointer.allocate(
            byteCount: valueOffset + MemoryLayout<Value>.size,
            alignment: max(MemoryLayout<pthread_mutex_t>.alignment, alignment))
        mutex = block.bindMemory(to: pthread_mutex_t.self, capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if DEBUG
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #endif
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        value = (block + valueOffset).bindMemory(to: Value.self, capacity: 1)
        value.initialize(to: initialValue)
    }

    @inlinable deinit {
        value.deinitialize(count: 1)
        pthread_mutex_destroy(mutex)
        UnsafeMutableRawPointer(mutex).deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    @inlinable public borrowing func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let locked = pthread_mutex_lock(mutex)
        // Only an error-checking (debug) mutex reports anything: EDEADLK, this thread holds it.
        precondition(locked == 0, "Locked: pthread_mutex_lock failed with \(locked) (a lock taken twice on one thread?)")
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}

// The value is reached only inside `withLock`, under the mutex, and is passed in and out as
// `sending`: the same reasoning as `Mutex`'s own conformance.
extension Locked: @unchecked Sendable where Value: ~Copyable {}
