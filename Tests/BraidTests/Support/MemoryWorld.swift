import BraidCore
import BraidIO
import Foundation
import Synchronization

@testable import Braid

/// A virtual loop with both in-memory networks, for the public-API suites: `MemoryNetwork`
/// carries QUIC's and UDP's datagrams, `MemoryStreamNetwork` TLS's and TCP's byte streams.
/// Inside `run`, every `NetworkListener` and `NetworkConnection` made (by the test or by the
/// helpers it calls, such as `RunningListener.start`) lives in this world, and virtual time
/// moves until the body returns, so what a test checks does not depend on the kernel or on
/// how threads are scheduled.
///
/// Each world has ports of its own (below the kernel's ephemeral range), so a port that a test
/// makes look unroutable (`ClientEstablishment.routeFailuresForTesting`, keyed by port for the
/// whole process) is no other world's port and no loopback listener's.
final class MemoryWorld: Sendable {
    let loop: EventLoop
    /// Datagrams between sockets of the world (QUIC, UDP).
    let network: MemoryNetwork
    /// Byte streams between sockets of the world (TLS, TCP).
    let streamNetwork: MemoryStreamNetwork
    let environment: NetworkEnvironment
    /// The first of this world's ports that `MemoryNetwork` does not hand out itself.
    private let reservedPorts: UInt16
    private let nextReserved = Atomic<UInt16>(0)

    /// Ports per world: `MemoryNetwork` binds from the first `automaticPorts`, `port()` hands
    /// out the rest.
    private static let portsPerWorld: UInt16 = 256
    private static let automaticPorts: UInt16 = 192
    /// Worlds take blocks in turn from 1024 up to the kernel's ephemeral range (32768).
    private static let blocks = Atomic<UInt16>(0)

    init(delay: Duration = .milliseconds(5)) throws {
        let blockCount = (32768 - 1024) / Self.portsPerWorld
        let block = Self.blocks.add(1, ordering: .relaxed).oldValue % blockCount
        let first = 1024 + block * Self.portsPerWorld
        reservedPorts = first + Self.automaticPorts
        loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
        network = MemoryNetwork(loop: loop, delay: delay, firstPort: first, lastPort: reservedPorts - 1)
        streamNetwork = MemoryStreamNetwork(loop: loop)
        environment = NetworkEnvironment(loop: loop, sockets: network, streamSockets: streamNetwork)
    }

    /// Runs `body` in a new world (`run`), then shuts the world's loop down. Worlds take turns,
    /// one per core at a time; a test waiting for its turn holds no thread. Every test starts
    /// at once, so a test's time limit counts its wait for a turn behind the suite's other
    /// worlds: the tests that run worlds have limits that allow for a loaded machine.
    static func run<T: Sendable>(
        delay: Duration = .milliseconds(5), limit: Duration = .seconds(120),
        _ body: @escaping @Sendable (MemoryWorld) async throws -> T
    ) async throws -> T {
        await turns.acquire()
        defer { turns.release() }
        let world = try MemoryWorld(delay: delay)
        defer { world.loop.shutdown() }
        return try await world.run(limit: limit) { try await body(world) }
    }

    /// A world's loop runs on Swift's cooperative pool (one thread per core), in the task that
    /// drives it: the engines' work for every connection of the world, besides the clock's
    /// steps. Dozens of worlds at once, as the parallel suite starts them, filled the pool and
    /// held back every other test's tasks (the full suite took a third longer); one per core
    /// at a time, each moves its clock at full pace.
    private static let turns = Turns(ProcessInfo.processInfo.activeProcessorCount)

    /// Runs `body` with this world as the `NetworkEnvironment`, moving virtual time until it
    /// returns; fails with `VirtualTimeLimit` if it has not after `limit` of virtual time.
    func run<T: Sendable>(limit: Duration = .seconds(120), _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await NetworkEnvironment.$current.withValue(environment) { try await loop.drive(limit: limit, body) }
    }

    /// A port of this world that nothing is bound to yet (for a listener of a chosen port, a
    /// client's local port, or an address where nobody answers).
    func port() -> NWEndpoint.Port {
        let offset = nextReserved.add(1, ordering: .relaxed).oldValue
        precondition(offset < Self.portsPerWorld - Self.automaticPorts, "the world's ports are used up")
        return NWEndpoint.Port(integerLiteral: reservedPorts + offset)
    }

    /// An endpoint on 127.0.0.1 where nobody listens: what is sent there vanishes.
    func nobody() -> NWEndpoint { .hostPort(host: "127.0.0.1", port: port()) }

    /// Waits `duration` of virtual time (the world's loop must be driven, as inside `run`).
    func sleep(for duration: Duration) async throws {
        try await loop.sleep(for: duration)
    }

    /// Checks `condition` every `interval` of virtual time until it holds (true) or `within`
    /// has passed (false). Virtual time moves while the tasks that make the condition true
    /// wait for a thread, so a wait for something that must happen is generous.
    func eventually(
        within: Duration = .seconds(60), every interval: Duration = .milliseconds(5), _ condition: @Sendable () async throws -> Bool
    ) async throws -> Bool {
        var waited = Duration.zero
        while true {
            if try await condition() { return true }
            guard waited < within else { return false }
            try await sleep(for: interval)
            waited += interval
        }
    }
}

extension EventLoop {
    /// Waits until `duration` has passed on the loop's clock (on a virtual loop: virtual
    /// time, moved by whoever drives it). Cancelling the task ends the wait with
    /// `CancellationError`.
    func sleep(for duration: Duration) async throws {
        let waiter = LoopSleep()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                waiter.set(continuation)
                execute { context in
                    context.schedule(at: context.now + duration) { _ in waiter.resume(.success(())) }
                }
            }
        } onCancel: {
            waiter.resume(.failure(CancellationError()))
        }
    }
}

/// A sleep's continuation, resumed once: by its timer, or by cancellation (whichever comes
/// first; one that comes before the continuation is set is kept for it).
private final class LoopSleep: Sendable {
    private let state = Locked<(continuation: CheckedContinuation<Void, any Error>?, early: Result<Void, any Error>?, done: Bool)>(
        (nil, nil, false))

    func set(_ continuation: CheckedContinuation<Void, any Error>) {
        let early = state.withLock { state -> Result<Void, any Error>? in
            guard let early = state.early else {
                state.continuation = continuation
                return nil
            }
            state.done = true
            return early
        }
        if let early { continuation.resume(with: early) }
    }

    func resume(_ result: Result<Void, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.done else { return nil }
            guard let continuation = state.continuation else {
                if state.early == nil { state.early = result }
                return nil
            }
            state.done = true
            state.continuation = nil
            return continuation
        }
        continuation?.resume(with: result)
    }
}
