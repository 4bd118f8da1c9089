import Braid
import BraidCore
import Foundation
import Logging
import Testing

/// The one switch for Braid's log level: the environment's spelling and the API over the
/// loggers Braid makes.
@Suite(.serialized) struct BraidLoggingTests {
    @Test func theEnvironmentNamesALevelInAnyCase() {
        #expect(BraidLog.level(from: ["BRAID_LOG_LEVEL": "debug"]) == .debug)
        #expect(BraidLog.level(from: ["BRAID_LOG_LEVEL": "TRACE"]) == .trace)
        #expect(BraidLog.level(from: ["BRAID_LOG_LEVEL": "loud"]) == nil)
        #expect(BraidLog.level(from: [:]) == nil)
    }

    @Test func settingTheLevelChangesEveryLoggerMadeAfterIt() {
        let before = BraidLogging.level
        defer { BraidLogging.level = before }
        BraidLogging.level = .trace
        #expect(BraidLog.logger(label: "braid.test").logLevel == .trace)
        BraidLogging.level = .error
        #expect(BraidLog.logger(label: "braid.test").logLevel == .error)
        BraidLogging.level = nil
        // Back to what the handler says (swift-log's default handler starts at info).
        #expect(BraidLog.logger(label: "braid.test").logLevel == Logger(label: "braid.test").logLevel)
    }

    /// Every debug line a TCP or TLS connection logs, on both ends, carries its identity:
    /// `connection.id` (one per connection), `connection.stack` and `connection.role`.
    @Test(arguments: ["tcp", "tls"])
    func connectionLinesCarryTheConnectionsIdentity(_ stack: String) async throws {
        let lines = CapturedLines()
        try await BraidLog.$handlerFactory.withValue({ label in CapturingLogHandler(label: label, lines: lines) }) {
            if stack == "tcp" {
                try await Self.echoOnce(server: TCP(), client: TCP(), lines: lines)
            } else {
                try await Self.echoOnce(server: testTLSServer(), client: testTLSClient(), lines: lines)
            }
        }
        let connectionLines = lines.all.filter { $0.label == "braid.connection" }
        for role in ["client", "server"] {
            let mine = connectionLines.filter { $0.metadata[ConnectionLogIdentity.roleKey] == .string(role) }
            let messages = Set(mine.map(\.message))
            #expect(messages.isSuperset(of: ["ready", "socket connected", "ended"]), "\(role): \(messages.sorted())")
            #expect(mine.allSatisfy { $0.metadata[ConnectionLogIdentity.stackKey] == .string(stack) })
            // One connection each side: one identity, Network.framework's style (C1, C2, ...).
            let ids = Set(mine.compactMap { line -> String? in
                guard case .string(let id)? = line.metadata[ConnectionLogIdentity.idKey] else { return nil }
                return id
            })
            #expect(ids.count == 1 && ids.first?.hasPrefix("C") == true, "\(role): \(ids)")
        }
        // No line of a connection goes without its identity.
        #expect(connectionLines.allSatisfy { $0.metadata[ConnectionLogIdentity.idKey] != nil })
        let clientID = connectionLines.first { $0.metadata[ConnectionLogIdentity.roleKey] == .string("client") }?.metadata[ConnectionLogIdentity.idKey]
        let serverID = connectionLines.first { $0.metadata[ConnectionLogIdentity.roleKey] == .string("server") }?.metadata[ConnectionLogIdentity.idKey]
        #expect(clientID != serverID)
    }

    /// A listener over `server` and a connection over `client` echo one message; returns once
    /// both ends have logged their end.
    private static func echoOnce<P: StreamProtocol>(server: P, client: P, lines: CapturedLines) async throws {
        let running = try await RunningStreamListener.start(server)
        defer { running.task.cancel() }
        let connection = NetworkConnection(to: running.endpoint) { client }
        let payload = Data("hello".utf8)
        try await connection.send(payload, endOfStream: true)
        #expect(try await connection.receive(exactly: payload.count).content == payload)
        await connection.close()
        let deadline = ContinuousClock.now + .seconds(60)
        func ended() -> Int { lines.all.filter { $0.label == "braid.connection" && $0.message == "ended" }.count }
        while ended() < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(ended() == 2, "both ends should log their end within 60 seconds")
    }
}

/// The lines a test's loggers wrote.
final class CapturedLines: Sendable {
    struct Line: Sendable {
        let label: String
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }
    private let lines = Locked<[Line]>([])
    var all: [Line] { lines.withLock { $0 } }
    func append(_ line: Line) { lines.withLock { $0.append(line) } }
}

/// A log handler that keeps every line, at every level, with its metadata merged.
struct CapturingLogHandler: LogHandler {
    let label: String
    let lines: CapturedLines
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.append(.init(label: label, level: event.level, message: "\(event.message)", metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}
