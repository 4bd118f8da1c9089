import Braid
import BraidPerf
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The TLS-over-TCP and TCP roles, over the public API (`NetworkConnection<TLS>`,
/// `NetworkConnection<TCP>`, `NetworkListener`), beside the raw-socket baselines they are
/// measured against. `--kind tls` or `--kind tcp` picks the stack. TLS runs without session
/// tickets, as the raw GnuTLS baseline does (`GNUTLS_NO_TICKETS`).
extension Roles {
    enum StreamKind: String {
        case tls, tcp
    }

    static func streamKind(_ flags: Flags) throws -> StreamKind {
        guard let kind = StreamKind(rawValue: flags["kind"] ?? "") else { throw ApplicationFailure("--kind must be tls or tcp") }
        return kind
    }

    /// The client's TLS stack: the test CA, the certificate's name, no tickets.
    static func tlsClient(_ flags: Flags, noDelay: Bool) -> TLS {
        TLS { TCP().noDelay(noDelay) }
            .trust(.certificateAuthorities(file: flags["ca"] ?? "")).serverName("localhost").ticketsEnabled(false)
    }

    static func streamEndpoint(_ flags: Flags) -> NWEndpoint {
        .hostPort(host: NWEndpoint.Host(benchHost), port: NWEndpoint.Port(integerLiteral: UInt16(flags.int("port", 0))))
    }

    /// `stream-server`: a TLS or TCP listener. `--mode sink` (default) reads each connection to
    /// its end, up to 256 KiB per receive as the raw server does, and counts the bytes;
    /// `--mode echo` echoes (the handshake rows' 1-byte echo); `--mode idle` holds each
    /// connection open without reading. Ends after `--connections` connections (or SIGTERM),
    /// printing `{"bytes", "messages", "connections"}`. `--nodelay 1` sets TCP_NODELAY;
    /// `--loops N` serves on N event loops (default 1, the listener's default).
    static func streamServer(_ flags: Flags) async throws {
        let noDelay = flags["nodelay"] == "1"
        let tcp = TCP().noDelay(noDelay).serverLoops(flags.int("loops", 1))
        switch try streamKind(flags) {
        case .tls:
            let tls = TLS { tcp }
                .identity(certificateChainFile: flags["cert"] ?? "", privateKeyFile: flags["key"] ?? "").ticketsEnabled(false)
            try await serveStreams(NetworkListener(for: .hostPort(host: NWEndpoint.Host(benchHost), port: .any)) { tls }, flags)
        case .tcp:
            try await serveStreams(NetworkListener(for: .hostPort(host: NWEndpoint.Host(benchHost), port: .any)) { tcp }, flags)
        }
    }

    private static func serveStreams<Stack: StreamProtocol>(_ listener: NetworkListener<Stack>, _ flags: Flags) async throws {
        let mode = flags["mode"] ?? "sink"
        let expected = flags.int("connections", Int.max)
        let served = Atomic(0), bytes = Atomic(0), messages = Atomic(0)
        let done = AsyncStream<Void>.makeStream()
        let serving = Task {
            try await listener.run { connection in
                defer { if served.add(1, ordering: .relaxed).newValue >= expected { done.continuation.finish() } }
                switch mode {
                case "echo":
                    try await StreamPerf.echo(on: connection)
                case "idle":
                    _ = try await connection.receive(atLeast: 1, atMost: 1)
                default:
                    let received = try await StreamPerf.receiveAll(from: connection, maximum: 256 << 10)
                    bytes.add(received.bytes, ordering: .relaxed)
                    messages.add(received.receives, ordering: .relaxed)
                }
            }
        }
        try await announceListening(listener)
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM)
        signal(SIGTERM, SIG_IGN)
        terminate.setEventHandler { done.continuation.finish() }
        terminate.resume()
        for await _ in done.stream {}
        serving.cancel()
        _ = try? await serving.value
        printJSON([
            "connections": served.load(ordering: .relaxed), "bytes": bytes.load(ordering: .relaxed),
            "messages": messages.load(ordering: .relaxed),
        ])
    }

    /// `stream-client`: once the connection is ready, sends `--bytes` pattern bytes in
    /// `--payload`-byte writes (64 KiB by default, as the raw client), finishes its side and
    /// waits until the server closes, as the raw client does; the time covers the sends and
    /// that wait, not the handshake.
    static func streamClient(_ flags: Flags) async throws {
        switch try streamKind(flags) {
        case .tls: try await streamBulk(NetworkConnection(to: streamEndpoint(flags)) { tlsClient(flags, noDelay: false) }, flags)
        case .tcp: try await streamBulk(NetworkConnection(to: streamEndpoint(flags)) { TCP() }, flags)
        }
    }

    private static func streamBulk<Stack: StreamProtocol>(_ connection: NetworkConnection<Stack>, _ flags: Flags) async throws {
        let bytes = flags.int("bytes", 0), payload = flags.int("payload", 65536)
        guard await becomesReady(connection) else { throw ApplicationFailure("connection ended: \(connection.state)") }
        let start = ContinuousClock.now
        let calls = try await StreamPerf.sendPattern(count: bytes, chunk: payload, on: connection)
        _ = try await StreamPerf.receiveAll(from: connection, maximum: 65536)
        let seconds = (ContinuousClock.now - start).seconds
        await connection.close()
        printJSON(["bytes": bytes, "seconds": seconds, "calls": calls])
    }

    /// `stream-handshakes`: `--count` sequential connections (TCP_NODELAY, as the raw
    /// handshake client), each timed from its creation until `ready` (seen on `states`, as the
    /// QUIC rows) and until a 1-byte echo has come back; then closed.
    static func streamHandshakes(_ flags: Flags) async throws {
        switch try streamKind(flags) {
        case .tls: try await streamHandshakes(flags) { NetworkConnection(to: streamEndpoint(flags)) { tlsClient(flags, noDelay: true) } }
        case .tcp: try await streamHandshakes(flags) { NetworkConnection(to: streamEndpoint(flags)) { TCP().noDelay(true) } }
        }
    }

    private static func streamHandshakes<Stack: StreamProtocol>(_ flags: Flags, make: () -> NetworkConnection<Stack>) async throws {
        let count = flags.int("count", 50)
        var ready: [UInt64] = [], firstByte: [UInt64] = []
        for _ in 0..<count {
            let start = ContinuousClock.now
            let connection = make()
            let readyAt = readyInstant(of: connection)
            try await connection.send([UInt8(7)])
            _ = try await connection.receive(exactly: 1)
            let replied = ContinuousClock.now
            guard let readyTime = await readyAt.value else { throw ApplicationFailure("connection ended: \(connection.state)") }
            ready.append((readyTime - start).nanoseconds)
            firstByte.append((replied - start).nanoseconds)
            await connection.close()
        }
        printJSON(["ready_ns": ready, "first_byte_ns": firstByte])
    }

    /// Waits until `listener` is ready and prints `listening <port>` for the harness; throws if
    /// it fails instead.
    static func announceListening<Stack: NetworkProtocol>(_ listener: NetworkListener<Stack>) async throws {
        for await state in listener.states {
            if state == .ready {
                FileHandle.standardOutput.write(Data("listening \(listener.port!)\n".utf8))
                return
            }
            if state.isFinal { throw ApplicationFailure("the listener did not start: \(state)") }
        }
    }

    /// `stream-idle-connections`: opens `--count` connections, `--concurrency` at a time,
    /// each until `ready` (the rate), keeps them idle, reports this process's resident memory
    /// before and after, prints `holding`, and closes them after `--hold` seconds.
    static func streamIdleConnections(_ flags: Flags) async throws {
        switch try streamKind(flags) {
        case .tls: try await holdIdle(flags) { NetworkConnection(to: streamEndpoint(flags)) { tlsClient(flags, noDelay: false) } }
        case .tcp: try await holdIdle(flags) { NetworkConnection(to: streamEndpoint(flags)) { TCP() } }
        }
    }

    /// Opens `--count` connections that `make` returns, `--concurrency` at a time, each until
    /// `ready` (the rate), keeps them idle, reports this process's resident memory before and
    /// after, prints `holding`, and closes them after `--hold` seconds. Any stack (QUIC too).
    static func holdIdle<Stack: NetworkProtocol>(
        _ flags: Flags, make: @escaping @Sendable () -> NetworkConnection<Stack>
    ) async throws {
        let count = flags.int("count", 1000), concurrency = flags.int("concurrency", 16)
        let before = residentBytes()
        let start = DispatchTime.now().uptimeNanoseconds
        let opened = try await withThrowingTaskGroup(of: [NetworkConnection<Stack>].self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var mine: [NetworkConnection<Stack>] = []
                    for _ in stride(from: worker, to: count, by: concurrency) {
                        let next = make()
                        guard await becomesReady(next) else { throw ApplicationFailure("connection ended: \(next.state)") }
                        mine.append(next)
                    }
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        try await Task.sleep(for: .milliseconds(300))
        let after = residentBytes()
        // The harness reads the server's memory now, while every connection is open.
        printJSON(["connections": count, "seconds": seconds, "rss_before": before, "rss_after": after])
        FileHandle.standardOutput.write(Data("holding\n".utf8))
        // Heap profiles: the held heap is what is still allocated at exit.
        if ProcessInfo.processInfo.environment["BRAID_HEAP_PROFILE_EXIT"] != nil { exit(0) }
        try await Task.sleep(for: .seconds(flags.int("hold", 2)))
        for connection in opened { await connection.close() }
    }
}
