import Braid
import BraidQUIC

/// QUIC's idle timeout in the test stacks, in milliseconds (ten minutes). With the 30 s
/// default, a connection a test still used expired on a loaded machine, where either end can
/// go unscheduled, or wait behind hundreds of other tests' tasks, for longer than that. Both
/// ends need it: a connection's idle timeout is the lower of its two ends' values. A test
/// whose subject is the idle timeout sets its own.
let testIdleTimeoutMilliseconds = 600_000

/// `testIdleTimeoutMilliseconds` as a duration, for the engines' configurations.
let testIdleTimeout = Duration.milliseconds(testIdleTimeoutMilliseconds)

extension QUIC {
    /// This stack with the tests' generous handshake timeout (`testHandshakeTimeout`) and idle
    /// timeout (`testIdleTimeoutMilliseconds`); a later `handshakeTimeout(_:)` or
    /// `idleTimeout(_:)` still sets its own.
    func testTimeouts() -> QUIC {
        handshakeTimeout(testHandshakeTimeout).idleTimeout(testIdleTimeoutMilliseconds)
    }
}

/// A listener's QUIC stack with the test server certificate and the tests' timeouts.
func testServer(alpn: [String] = ["echo"]) -> QUIC {
    QUIC(alpn: alpn).identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")).testTimeouts()
}

/// A client QUIC stack trusting the test CA, for the test certificate's name, with the tests'
/// timeouts.
func testClient(alpn: [String] = ["echo"]) -> QUIC {
    QUIC(alpn: alpn).testTimeouts().trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost")
}

extension QUICTransportConfiguration {
    /// The engines' transport settings with the tests' handshake and idle timeouts, for
    /// engines on real sockets and clocks (the simulated network's virtual clock needs none).
    mutating func useTestTimeouts() {
        handshakeTimeout = testHandshakeTimeout
        idleTimeout = testIdleTimeout
    }
}
