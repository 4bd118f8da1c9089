import Braid
import BraidCore
import Foundation

/// What `ApplicationClient` runs the perf and echo applications over: the byte streams and
/// the messages of one stack. QUIC carries every stream and its datagrams on one connection
/// (`QUICTransport`); the other stacks carry one byte stream per connection, or messages only
/// (`ConnectionTransport`).
package protocol ApplicationTransport: Sendable {
    /// Starts the first connection.
    func start()
    /// When the first connection becomes ready (nil if it ends first); call before `start`.
    func readyInstant() -> Task<ContinuousClock.Instant?, Never>
    /// Starts the first connection if needed and waits until it is ready; false if it ended.
    func becomesReady() async -> Bool
    /// The first connection's state, for messages.
    var stateDescription: String { get }
    /// Byte stream `index` of the run.
    func openChannel(_ index: Int) async throws -> any ByteChannel
    /// The first connection's messages.
    func messageChannel() throws -> any MessageChannel
    /// QUIC only: the server accepted 0-RTT data.
    var earlyDataAccepted: Bool { get }
    /// QUIC only: a key update, and a move to a new local port.
    func updateKeys() async throws
    func migrate() async throws
    /// QUIC only: the first connection's statistics.
    var statistics: NetworkConnectionStatistics? { get async }
    /// Closes every connection of the run (QUIC: with `applicationErrorCode` and `reason`).
    func close(applicationErrorCode: UInt64, reason: String) async
}

/// One QUIC connection: a stream per `openChannel`, and its datagrams.
package struct QUICTransport: ApplicationTransport {
    package let connection: NetworkConnection<QUIC>

    package init(_ connection: NetworkConnection<QUIC>) { self.connection = connection }

    package func start() { connection.start() }
    package func readyInstant() -> Task<ContinuousClock.Instant?, Never> { BraidPerf.readyInstant(of: connection) }
    package func becomesReady() async -> Bool { await BraidPerf.becomesReady(connection) }
    package var stateDescription: String { "\(connection.state)" }
    package func openChannel(_ index: Int) async throws -> any ByteChannel { try await connection.openStream() }
    package func messageChannel() throws -> any MessageChannel { QUICDatagramChannel(connection: connection) }
    package var earlyDataAccepted: Bool { connection.earlyDataAccepted }
    package func updateKeys() async throws { try await connection.updateKeys() }
    package func migrate() async throws { try await connection.migrate() }
    package var statistics: NetworkConnectionStatistics? { get async { await connection.statistics } }
    package func close(applicationErrorCode: UInt64, reason: String) async {
        await connection.close(applicationErrorCode: applicationErrorCode, reason: reason)
    }
}

/// Connections of a stack with one byte stream each (TLS, TCP, WebSocket) or messages only
/// (UDP, DTLS): byte stream 0 is the first connection's, every other one a new connection's;
/// the messages are the first connection's.
package final class ConnectionTransport<Stack: NetworkProtocol>: ApplicationTransport {
    let name: String
    let first: NetworkConnection<Stack>
    let connect: @Sendable () -> NetworkConnection<Stack>
    let byteChannel: (@Sendable (NetworkConnection<Stack>) -> any ByteChannel)?
    let messages: (@Sendable (NetworkConnection<Stack>) -> any MessageChannel)?
    private let opened = Locked<[NetworkConnection<Stack>]>([])

    /// - Parameters:
    ///   - name: the stack's name, for errors.
    ///   - connect: makes a new connection to the server.
    ///   - byteChannel: a connection's byte stream (nil: the stack has none).
    ///   - messages: a connection's messages (nil: the stack has none).
    package init(
        name: String, connect: @escaping @Sendable () -> NetworkConnection<Stack>,
        byteChannel: (@Sendable (NetworkConnection<Stack>) -> any ByteChannel)?,
        messages: (@Sendable (NetworkConnection<Stack>) -> any MessageChannel)?
    ) {
        self.name = name
        self.connect = connect
        self.byteChannel = byteChannel
        self.messages = messages
        first = connect()
    }

    package func start() { first.start() }
    package func readyInstant() -> Task<ContinuousClock.Instant?, Never> { BraidPerf.readyInstant(of: first) }
    package func becomesReady() async -> Bool { await BraidPerf.becomesReady(first) }
    package var stateDescription: String { "\(first.state)" }

    package func openChannel(_ index: Int) async throws -> any ByteChannel {
        guard let byteChannel else {
            throw ApplicationFailure("\(name) carries no byte stream: perf, and echo with --bytes, need quic, tls, tcp, ws or wss")
        }
        if index == 0 { return byteChannel(first) }
        let connection = connect()
        opened.withLock { $0.append(connection) }
        return byteChannel(connection)
    }

    package func messageChannel() throws -> any MessageChannel {
        guard let messages else {
            throw ApplicationFailure("\(name) carries no messages: echo with --datagrams needs quic, udp, dtls, ws or wss")
        }
        return messages(first)
    }

    package var earlyDataAccepted: Bool { false }
    package func updateKeys() async throws { throw ApplicationFailure("key updates are QUIC's; \(name) has none") }
    package func migrate() async throws { throw ApplicationFailure("migration is QUIC's; \(name) has none") }
    package var statistics: NetworkConnectionStatistics? { get async { nil } }

    package func close(applicationErrorCode: UInt64, reason: String) async {
        for connection in [first] + opened.withLock({ $0 }) { await connection.close() }
    }
}
