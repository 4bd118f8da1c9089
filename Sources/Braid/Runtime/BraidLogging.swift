import BraidCore
import Logging

/// One switch for the level of every logger Braid makes (labels `braid.quic`, `braid.listener`,
/// `braid.path`, `braid.classic` and the others), whatever stack logs.
///
/// Braid logs through swift-log, so its lines go wherever the process's `LoggingSystem` sends
/// them. By default Braid's loggers take their handler's level; setting `level` overrides it
/// for Braid's loggers only, from then on. The environment variable `BRAID_LOG_LEVEL` (for
/// example `BRAID_LOG_LEVEL=debug`) sets it without code, read when Braid makes its first
/// logger. Every connection's lines carry its identity as metadata (`connection.id`, `C1`,
/// `C2`, ...; `connection.stack`; `connection.role`), and a QUIC connection's engine lines its
/// connection ID (`quic.cid`) too.
///
/// ```swift
/// BraidLogging.level = .debug
/// ```
///
/// Two other switches help when looking at the wire: `SSLKEYLOGFILE=path` makes GnuTLS write
/// every TLS, DTLS and QUIC session's secrets to `path` in the NSS key log format (Wireshark
/// decrypts captures with it; the variable is read once per process), and
/// `QUIC.qlogDirectory(_:)` writes a qlog trace per QUIC connection.
public enum BraidLogging {
    /// The level of Braid's loggers; nil: each follows its handler's level.
    public static var level: Logger.Level? {
        get { BraidLog.level }
        set { BraidLog.level = newValue }
    }

    /// The environment variable read for `level` at start-up.
    public static let environmentVariable = BraidLog.environmentVariable
}
