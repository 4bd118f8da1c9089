import Braid
import BraidCore
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
}
