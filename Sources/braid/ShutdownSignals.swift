import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The write end of the signal pipe (a socket pair), read by `forwardSignal` (set before the handler is
/// installed, never changed after).
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1
/// Its read end (set with it).
nonisolated(unsafe) private var signalPipeReadEnd: Int32 = -1

/// The signal handler: writes the signal's number into the pipe and nothing else (write is
/// async-signal-safe; the handler may interrupt any thread, in the middle of anything).
private func forwardSignal(_ signal: Int32) {
    let saved = errno
    var byte = UInt8(truncatingIfNeeded: signal)
    _ = write(signalPipeWriteEnd, &byte, 1)
    errno = saved
}

/// SIGTERM and SIGINT for `braid serve`: the first one asks for a graceful shutdown, a second
/// one (or a shutdown that takes longer than the grace period) ends the process at once.
///
/// The signals reach the process through a handler installed with sigaction that only writes
/// the signal's number into a pipe, whichever thread the kernel picks; a thread of its own reads
/// the pipe and acts. Blocking the signals everywhere (for sigwait or signalfd) would need every
/// thread to block them, and threads the runtime started before `install` do not. The handler
/// also replaces the SIG_IGN a shell gives SIGINT in a background job, so Ctrl-C and `kill -INT`
/// work there too.
enum ShutdownSignals {
    static let handled = [SIGTERM, SIGINT]

    /// Installs the handler and starts the thread that calls `shutdown` on the first signal.
    static func install(gracePeriod: Duration, shutdown: @escaping @Sendable (Int32) -> Void) throws {
        // A socket pair serves as the pipe: Glibc's module has no pipe2, and the ends must be
        // close-on-exec from the start.
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw CommandFailure("cannot make the signal pipe: \(String(cString: strerror(errno)))")
        }
        // A signal storm must never block the handler: extra bytes are dropped when full.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        signalPipeWriteEnd = ends[1]
        signalPipeReadEnd = ends[0]
        let readEnd = ends[0]

        var action = sigaction()
        action.__sigaction_handler.sa_handler = forwardSignal
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in handled {
            guard sigaction(signal, &action, nil) == 0 else {
                throw CommandFailure("cannot handle signal \(signal): \(String(cString: strerror(errno)))")
            }
            sigaddset(&mask, signal)
        }
        // A parent may have started us with the signals blocked; this thread takes them.
        pthread_sigmask(SIG_UNBLOCK, &mask, nil)

        let signals = mask
        let thread = Thread {
            // The kernel's name for the thread too, so tools (top -H, perf) and the tests find it
            // in /proc: `Thread.name` does not set it on Linux, and Glibc's Swift module exports
            // neither pthread_setname_np nor prctl.
            try? "braid-signals".write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            var signals = signals
            pthread_sigmask(SIG_UNBLOCK, &signals, nil)
            guard let first = readSignal(readEnd, timeout: nil) else { return }
            // Two signals that came together (say, while the process was stopped): the second
            // means what it always means.
            exitIfSignalledAgain()
            shutdown(first)
            let grace = gracePeriod.components
            let milliseconds = Int32(clamping: grace.seconds * 1000 + grace.attoseconds / 1_000_000_000_000_000)
            if let second = readSignal(readEnd, timeout: milliseconds) { exitAtOnce(second) }
            FileHandle.standardError.write(Data("braid: the graceful shutdown did not finish within \(gracePeriod): exiting\n".utf8))
            _exit(1)
        }
        thread.name = "braid-signals"
        thread.start()
    }

    /// Exits at once if a signal is waiting in the pipe: after the first signal, before the
    /// shutdown starts, and once it has finished, so a second signal is never lost to a
    /// shutdown that ends first.
    static func exitIfSignalledAgain() {
        guard signalPipeReadEnd >= 0 else { return }
        if let second = readSignal(signalPipeReadEnd, timeout: 0) { exitAtOnce(second) }
        // A signal sent to the process waits in the kernel until one of its threads runs its
        // handler; on a busy machine that can come after the shutdown (two signals sent to a
        // stopped process arrive on SIGCONT, the second some milliseconds after the first).
        var pending = sigset_t()
        sigpending(&pending)
        for signal in handled where sigismember(&pending, signal) == 1 { exitAtOnce(signal) }
    }

    /// Who ends the process: 0 while nobody has decided, 1 once the graceful shutdown has
    /// finished (the caller of `finish` returns and exits 0), 2 once a second signal has.
    private static let ending = Atomic<Int32>(0)

    /// The graceful shutdown has finished: exits at once if a second signal is waiting, and
    /// otherwise returns (the process exits 0) unless the signal thread has just read a second
    /// signal and is exiting with it, in which case this thread waits for that exit. Without
    /// the decision in one place the two exits raced: a run under ThreadSanitizer (which makes
    /// `_exit` slow) printed "SIGTERM again: exiting at once" and still exited 0.
    static func finish() {
        exitIfSignalledAgain()
        guard ending.compareExchange(expected: 0, desired: 1, ordering: .sequentiallyConsistent).exchanged else {
            while true { pause() }
        }
    }

    private static func exitAtOnce(_ signal: Int32) -> Never {
        // The shutdown finished first: its exit (0) stands, and this thread waits for it.
        guard ending.compareExchange(expected: 0, desired: 2, ordering: .sequentiallyConsistent).exchanged else {
            while true { pause() }
        }
        FileHandle.standardError.write(Data("braid: \(name(signal)) again: exiting at once\n".utf8))
        _exit(128 + signal)
    }

    /// The next signal number from the pipe; nil if `timeout` (milliseconds) passes first.
    private static func readSignal(_ fd: Int32, timeout: Int32?) -> Int32? {
        while true {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, timeout ?? -1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var byte: UInt8 = 0
            if read(fd, &byte, 1) == 1 { return Int32(byte) }
        }
    }

    static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        default: "signal \(signal)"
        }
    }
}
