import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `Synchronization.Mutex` with the hand-over made visible to ThreadSanitizer: Braid's lock.
///
/// On Linux a contended `Mutex` passes from one thread to the next through the kernel
/// (`FUTEX_LOCK_PI`/`FUTEX_UNLOCK_PI`, and a spin on the lock word, both inside the
/// toolchain's `libswiftSynchronization.so`, which is not instrumented). A `-sanitize=thread`
/// build sees only the uncontended fast path, so every critical section that ever waited was
/// reported as a data race with the one before it. `Locked` is the same mutex and, when the
/// process runs under ThreadSanitizer, tells it that the lock was taken after the section that
/// last released it (`__tsan_acquire`/`__tsan_release` on the mutex's address: the
/// happens-before edge the kernel really provides). The hooks are compiled in only when the
/// build defines BRAID_THREAD_SANITIZER (tools/run-sanitized-tests.sh thread does), and looked
/// up once with `dlsym`, as the Swift concurrency runtime finds them; every other build is
/// `Mutex.withLock` and nothing else.
///
/// Same shape as `Mutex`: keep it in a `let` of a class or a global, and read or change the
/// value only inside `withLock`.
///
/// Public and `@inlinable` so that every module's critical sections compile to the inlined
/// mutex, as `Mutex.withLock` does: this toolchain does not inline a `package` declaration
/// into another module, and called through its generic entry point each section cost runtime
/// type-metadata lookups (2% to 3% of a QUIC receiver's CPU). `Braid` does not re-export it.
public struct Locked<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    @inlinable public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with the value while holding the lock.
    @inlinable public borrowing func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        #if BRAID_THREAD_SANITIZER
        guard let hooks = ThreadSanitizerHooks.installed else { return try mutex.withLock(body) }
        // The mutex's own address names the lock to ThreadSanitizer: stable, because a
        // ~Copyable value kept in a `let` never moves (taking the value's address instead
        // would be an access to it before the acquire is known).
        let address = withUnsafePointer(to: mutex) { UnsafeRawPointer($0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            hooks.acquire(address)
            defer { hooks.release(address) }
            return try body(&value)
        }
        #else
        return try mutex.withLock(body)
        #endif
    }
}

extension Locked: Sendable where Value: ~Copyable {}

#if BRAID_THREAD_SANITIZER
/// ThreadSanitizer's annotation entry points, present only in a process built with it.
@usableFromInline struct ThreadSanitizerHooks: Sendable {
    @usableFromInline typealias Hook = @convention(c) (UnsafeRawPointer?) -> Void

    @usableFromInline let acquire: Hook
    @usableFromInline let release: Hook

    @usableFromInline static let installed: ThreadSanitizerHooks? = {
        #if canImport(Glibc)
        // A nil handle is RTLD_DEFAULT: the executable (where the sanitizer runtime is linked
        // statically) and every library loaded.
        guard let acquire = dlsym(nil, "__tsan_acquire"), let release = dlsym(nil, "__tsan_release")
        else { return nil }
        return ThreadSanitizerHooks(
            acquire: unsafeBitCast(acquire, to: Hook.self),
            release: unsafeBitCast(release, to: Hook.self)
        )
        #else
        return nil
        #endif
    }()
}
#endif
