import Foundation
import Logging

/// Where every Braid logger comes from, so one switch sets the level of all of them.
///
/// `level` nil (the default) leaves each logger at its handler's level, as swift-log intends
/// for libraries; set, it overrides that level for Braid's loggers only. `BRAID_LOG_LEVEL`
/// (`trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`) sets it at start-up;
/// `Braid.logLevel` sets it in code.
package enum BraidLog {
    /// The variable read once, when the first Braid logger is made.
    package static let environmentVariable = "BRAID_LOG_LEVEL"

    private static let override = Locked<Logger.Level?>(level(from: ProcessInfo.processInfo.environment))

    package static var level: Logger.Level? {
        get { override.withLock { $0 } }
        set { override.withLock { $0 = newValue } }
    }

    /// Where Braid's loggers send their lines when not to the bootstrapped `LoggingSystem`: a
    /// task-local factory, read where loggers are made (a connection's, where it is made: a
    /// client's in its initializer, a listener's connections' when the listener starts), so
    /// tests running side by side each capture their own lines.
    @TaskLocal package static var handlerFactory: (@Sendable (String) -> any LogHandler)?

    /// A logger labelled `label` at the switch's level (if one is set).
    package static func logger(label: String) -> Logger {
        var logger = handlerFactory.map { factory in Logger(label: label, factory: factory) } ?? Logger(label: label)
        if let level { logger.logLevel = level }
        return logger
    }

    /// The level a `BRAID_LOG_LEVEL` value names; nil when unset or not a level.
    package static func level(from environment: [String: String]) -> Logger.Level? {
        environment[environmentVariable].flatMap { Logger.Level(rawValue: $0.lowercased()) }
    }
}
