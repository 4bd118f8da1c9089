import Braid
import BraidPerf
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The small Codable value the Coder rows send: a game move, about 80 bytes of JSON.
struct BenchMove: Codable, Sendable, Equatable {
    var player: String
    var sequence: Int
    var row: Int
    var column: Int
    var capture: Bool

    static let players = (0..<8).map { "player-\($0)" }

    /// The value sent as message `sequence` (cheap to make: the same values in every process).
    static func sample(_ sequence: Int) -> BenchMove {
        BenchMove(player: players[sequence % 8], sequence: sequence, row: sequence % 19, column: (sequence / 19) % 19, capture: sequence % 7 == 0)
    }
}

/// The message-framer roles (`TLV { TLS() }` and `Coder(BenchMove.self, using: .json) { TLS() }`
/// over the public API), one direction: the client sends `--messages` messages, the server
/// receives and counts them, then closes. `--framer tlv` (with `--size` bytes of value per
/// message, type 1), `--framer tlv-tcp` (the same over plain TCP), `--framer tlv-framer-tcp`
/// (TLV's wire through a custom framer, `TLVWireFramer`, over plain TCP) or `--framer coder`. TLS
/// without session tickets, as the raw loops.
extension Roles {
    static func framedTLS(server flags: Flags) -> TLS {
        TLS { TCP() }.identity(certificateChainFile: flags["cert"] ?? "", privateKeyFile: flags["key"] ?? "").ticketsEnabled(false)
    }

    /// `framed-server`: serves one connection, receiving messages (`messages`) until it has
    /// counted `--messages` of them, then closes it and prints `{"messages", "bytes"}` (value
    /// bytes; for Coder, the encoded size is not seen, so bytes is 0).
    static func framedServer(_ flags: Flags) async throws {
        let expected = flags.int("messages", 0)
        let endpoint = NWEndpoint.hostPort(host: NWEndpoint.Host(benchHost), port: .any)
        switch flags["framer"] {
        case "tlv":
            let tls = framedTLS(server: flags)
            let listener = NetworkListener(for: endpoint) { TLV { tls } }
            try await serveFramed(listener) { try await countTLV(on: $0, expected: expected) }
        case "tlv-tcp":
            let listener = NetworkListener(for: endpoint) { TLV { TCP() } }
            try await serveFramed(listener) { try await countTLV(on: $0, expected: expected) }
        case "tlv-framer-tcp":
            let listener = NetworkListener(for: endpoint) { Framer<TLVWireFramer> { TCP() } }
            try await serveFramed(listener) { connection in
                var messages = 0, bytes = 0
                while messages < expected {
                    let (content, metadata) = try await connection.receive()
                    guard metadata.framer["type"] as? UInt32 == 1 else { throw ApplicationFailure("a message of another type") }
                    messages += 1
                    bytes += content.count
                }
                return (messages, bytes)
            }
        case "coder":
            let tls = framedTLS(server: flags)
            let listener = NetworkListener(for: endpoint) { Coder(BenchMove.self, using: .json) { tls } }
            try await serveFramed(listener) { connection in
                var messages = 0, last = -1
                for try await (move, _) in connection.messages {
                    guard move.sequence == last + 1 else { throw ApplicationFailure("move \(move.sequence) after \(last)") }
                    last = move.sequence
                    messages += 1
                    if messages == expected { break }
                }
                return (messages, 0)
            }
        default: throw ApplicationFailure("--framer must be tlv, tlv-tcp, tlv-framer-tcp or coder")
        }
    }

    private static func serveFramed<Stack: NetworkProtocol>(
        _ listener: NetworkListener<Stack>, count: @escaping @Sendable (NetworkConnection<Stack>) async throws -> (Int, Int)
    ) async throws {
        let result = Mutex<(messages: Int, bytes: Int, error: String?)?>(nil)
        let done = AsyncStream<Void>.makeStream()
        let serving = Task {
            try await listener.run { connection in
                defer { done.continuation.finish() }
                do {
                    let (messages, bytes) = try await count(connection)
                    result.withLock { $0 = (messages, bytes, nil) }
                } catch {
                    result.withLock { $0 = (0, 0, "\(error)") }
                }
                await connection.close()
            }
        }
        try await announceListening(listener)
        for await _ in done.stream {}
        serving.cancel()
        _ = try? await serving.value
        guard let counted = result.withLock({ $0 }) else { throw ApplicationFailure("no connection served") }
        if let error = counted.error { throw ApplicationFailure("receiving: \(error)") }
        printJSON(["messages": counted.messages, "bytes": counted.bytes])
    }

    /// Receives TLV messages until `expected` of them came (or the peer ended): how many, and
    /// their value bytes.
    private static func countTLV(on connection: NetworkConnection<TLV>, expected: Int) async throws -> (Int, Int) {
        var messages = 0, bytes = 0
        for try await (content, _) in connection.messages {
            messages += 1
            bytes += content.count
            if messages == expected { break }
        }
        return (messages, bytes)
    }

    /// `framed-client`: once the connection is ready, sends `--messages` messages, then waits
    /// until the server has closed (its `messages` end); the time covers the sends and that
    /// wait, not the handshake. Prints `{"messages", "seconds"}`.
    static func framedClient(_ flags: Flags) async throws {
        let messages = flags.int("messages", 0)
        let tls = tlsClient(flags, noDelay: false)
        switch flags["framer"] {
        case "tlv":
            let connection = NetworkConnection(to: streamEndpoint(flags)) { TLV { tls } }
            let value = Data(PerfPattern.slice(at: 0, count: flags.int("size", 1024)))
            try await timeFramed(connection, messages: messages) {
                for _ in 0..<messages { try await connection.send(value, type: 1) }
            } waitForClose: {
                for try await _ in connection.messages {}
            }
        case "tlv-tcp":
            let connection = NetworkConnection(to: streamEndpoint(flags)) { TLV { TCP() } }
            let value = Data(PerfPattern.slice(at: 0, count: flags.int("size", 1024)))
            try await timeFramed(connection, messages: messages) {
                for _ in 0..<messages { try await connection.send(value, type: 1) }
            } waitForClose: {
                for try await _ in connection.messages {}
            }
        case "tlv-framer-tcp":
            let connection = NetworkConnection(to: streamEndpoint(flags)) { Framer<TLVWireFramer> { TCP() } }
            let value = Data(PerfPattern.slice(at: 0, count: flags.int("size", 1024)))
            try await timeFramed(connection, messages: messages) {
                for _ in 0..<messages { try await connection.send(value, metadata: TLVWireFramer.message(type: 1)) }
            } waitForClose: {
                // The server's close ends the receives with an error once nothing more comes.
                while (try? await connection.receive()) != nil {}
            }
        case "coder":
            let connection = NetworkConnection(to: streamEndpoint(flags)) { Coder(BenchMove.self, using: .json) { tls } }
            try await timeFramed(connection, messages: messages) {
                for sequence in 0..<messages { try await connection.send(BenchMove.sample(sequence)) }
            } waitForClose: {
                for try await _ in connection.messages {}
            }
        default: throw ApplicationFailure("--framer must be tlv, tlv-tcp, tlv-framer-tcp or coder")
        }
    }

    /// `coder-framing`: the `throughput` scenario's in-process JSON and Coder framing rows
    /// alone, `--slices` turns of `--values` values each (default 10 of 20,000). Prints the
    /// mean us per message, both halves: `{"json", "json_reused", "framed"}`.
    static func coderFraming(_ flags: Flags) throws {
        let slices = flags.int("slices", 10), values = flags.int("values", 20_000)
        var alone = 0.0, reused = 0.0, framed = 0.0
        for _ in 0..<slices {
            alone += try FramerRows.jsonAlone(values, reuse: false).total
            framed += try FramerRows.coderFramingAlone(values).total
            reused += try FramerRows.jsonAlone(values, reuse: true).total
        }
        let n = Double(slices)
        printJSON(["json": alone / n, "json_reused": reused / n, "framed": framed / n])
    }

    private static func timeFramed<Stack: NetworkProtocol>(
        _ connection: NetworkConnection<Stack>, messages: Int, send: () async throws -> Void, waitForClose: () async throws -> Void
    ) async throws {
        guard await becomesReady(connection) else { throw ApplicationFailure("connection ended: \(connection.state)") }
        let start = ContinuousClock.now
        try await send()
        try await waitForClose()
        let seconds = (ContinuousClock.now - start).seconds
        await connection.close()
        printJSON(["messages": messages, "seconds": seconds])
    }
}
