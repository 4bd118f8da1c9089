import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// How `braid serve` runs and stops: its listener is a service in a swift-service-lifecycle
/// `ServiceGroup`; SIGTERM or SIGINT starts the group's graceful shutdown, and a second signal
/// (or a shutdown still running after the grace period) ends the process at once.
///
/// The signals come from one `UnixSignalsSequence` rather than the group's own
/// `gracefulShutdownSignals`, because the group has no "second signal exits at once": its
/// cancellation signals cancel the services, which for a listener is the graceful shutdown
/// again, and its cancellation deadline ends in `fatalError`. The sequence is made (and its
/// signal sources registered) before the listener binds, so a signal sent once `listening`
/// is printed is never missed. On Linux, Dispatch's signal sources install a handler of their
/// own for the signal, which replaces the SIG_IGN a shell gives SIGINT in a background job:
/// `kill -INT %1` works there too.
enum ServeLifecycle {
    static let gracePeriod: Duration = .seconds(10)

    /// Who ends the process: 0 while nobody has decided, 1 once the graceful shutdown has
    /// finished (`run` returns and the process exits 0), 2 once a second signal has.
    private static let ending = Atomic<Int32>(0)

    /// Runs `service` in a service group until it returns, throws, or a signal shuts it down.
    static func run(_ service: some Service) async throws {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        var logger = Logger(label: "braid.serve")
        logger.logLevel = .warning
        let group = ServiceGroup(services: [service], logger: logger)
        let watcher = Task {
            var iterator = signals.makeAsyncIterator()
            guard let first = await iterator.next() else { return }
            FileHandle.standardError.write(Data("braid: \(first): closing every connection (again: exit at once)\n".utf8))
            // Not awaited here: the next signal must be read while the shutdown runs.
            Task { await group.triggerGracefulShutdown() }
            Task.detached {
                try? await Task.sleep(for: gracePeriod)
                guard ending.compareExchange(expected: 0, desired: 2, ordering: .sequentiallyConsistent).exchanged else { return }
                FileHandle.standardError.write(Data("braid: the graceful shutdown did not finish within \(gracePeriod): exiting\n".utf8))
                _exit(1)
            }
            guard let second = await iterator.next() else { return }
            guard ending.compareExchange(expected: 0, desired: 2, ordering: .sequentiallyConsistent).exchanged else { return }
            FileHandle.standardError.write(Data("braid: \(second) again: exiting at once\n".utf8))
            _exit(128 + second.rawValue)
        }
        defer { watcher.cancel() }
        try await group.run()
        // The shutdown finished: its exit (0) stands unless a second signal has just decided
        // otherwise, in which case that exit is on its way.
        guard ending.compareExchange(expected: 0, desired: 1, ordering: .sequentiallyConsistent).exchanged else {
            while true { pause() }
        }
    }

    /// `body` as a service: it runs until the group's graceful shutdown cancels it (a
    /// listener's `run` and `runHTTP3` shut down gracefully when cancelled).
    static func service(_ body: @escaping @Sendable () async throws -> Void) -> some Service {
        ClosureService { try await cancelWhenGracefulShutdown { try await body() } }
    }
}
