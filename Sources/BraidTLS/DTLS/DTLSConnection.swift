import CBraid
import Glibc

/// One DTLS 1.2 connection over datagrams, sans IO: datagrams in, messages out and back, with
/// no sockets, timers or threads. GnuTLS reads and writes this object's datagram queues.
///
/// DTLS 1.2 only: GnuTLS 3.7 has no DTLS 1.3.
///
/// Owned by one event loop (not `Sendable`). A driver's pass over one connection:
/// 1. `receiveDatagram(_:)` for each datagram from the peer (whole datagrams; a full inbox drops
///    the datagram, as a full socket buffer would).
/// 2. `process(deliver:)`: advances the handshake and hands out every message received, one
///    call of `deliver` per record. A `TLSError` thrown here is final; the alert telling the peer
///    why is queued, so send the pending datagrams before closing.
/// 3. `send(_:)` after `.handshakeCompleted`: one message, one record, one datagram.
/// 4. `popDatagram()` until nil: the datagrams to send, in order.
/// 5. While handshaking, arm a timer for `retransmissionTimeout` and call `process` when it
///    fires: GnuTLS then retransmits its last flight (GnuTLS keeps the retransmission clock
///    itself; this object reads none).
///
/// ```swift
/// let connection = try DTLSConnection.client(context: context, serverName: "example.com")
/// _ = try connection.process { _ in }  // the first call queues the ClientHello
/// while let datagram = connection.popDatagram() {
///     datagram.withUnsafeBytes { _ = send(fd, $0.baseAddress, $0.count, 0) }  // a connected UDP socket
/// }
/// ```
public final class DTLSConnection {
    /// Which end of the connection this is.
    public typealias Role = TLSConnection.Role

    /// Most received datagrams waiting for `process`; more are dropped.
    public static let inboxLimit = 64
    /// Most datagrams waiting for `popDatagram`; `send` refuses (returns false) at this count.
    public static let outboxLimit = 256
    /// The default datagram size (GnuTLS's own default, safe on any IPv6 path).
    public static let defaultMTU = 1200

    public let role: Role
    /// The name the client sent as SNI and checked the certificate against ("" on a server).
    public let serverName: String
    let session: gnutls_session_t
    let clientContext: DTLSClientContext?
    let serverContext: DTLSServerContext?
    /// Received datagrams GnuTLS has not read yet, oldest first.
    var inbox: [[UInt8]] = []
    /// Datagrams GnuTLS wrote, oldest first.
    var outbox: [[UInt8]] = []

    enum State {
        /// Client before its first `process`.
        case notStarted
        case handshaking
        /// Handshake done, waiting for the caller's verdict on the peer (`callerVerifiesPeer`).
        case awaitingVerdict
        case established
        case failed(TLSError)
    }
    var state: State
    /// The caller accepted the peer: the next `process` reports `.handshakeCompleted`.
    var announcesCompletion = false
    /// Our own certificate check failed (set inside GnuTLS's verify callback).
    var certificateProblem: CertificateProblem?
    /// Server: the ALPN list from the client's hello, for `alpnMismatch` (nil: it sent none).
    var clientOfferedALPN: [String]?

    /// Datagrams `receiveDatagram` refused because `inboxLimit` already waited.
    public internal(set) var droppedInboundDatagramCount = 0
    /// The peer sent close_notify.
    public internal(set) var peerClosed = false
    /// We queued close_notify.
    public internal(set) var closeSent = false
    /// The handshake is complete and messages flow.
    public var isHandshakeComplete: Bool { if case .established = state { true } else { false } }
    /// The ALPN protocol agreed on (nil: none), once known.
    public internal(set) var negotiatedALPN: String?
    /// The caller, not the engine, judges the peer's certificate (its client's or server's
    /// configuration says so): the handshake stops at `.peerAwaitingVerdict`.
    var callerVerifiesPeer: Bool {
        clientContext?.configuration.callerVerifiesPeer ?? serverContext?.configuration.callerVerifiesPeer ?? false
    }
    /// The error that ended the connection, if one did.
    public var failure: TLSError? { if case .failed(let error) = state { error } else { nil } }

    /// Bytes in the engine's queues: received datagrams waiting for `process` and datagrams
    /// waiting for `popDatagram` (each at most `inboxLimit` and `outboxLimit` datagrams).
    public var queuedBytes: Int {
        var total = 0
        for datagram in inbox { total += datagram.count }
        for datagram in outbox { total += datagram.count }
        return total
    }

    init(role: Role, serverName: String, client: DTLSClientContext?, server: DTLSServerContext?, mtu: Int) throws(TLSError) {
        self.role = role
        self.serverName = serverName
        clientContext = client
        serverContext = server
        state = role == .client ? .notStarted : .handshaking
        var flags = (role == .client ? GNUTLS_CLIENT : GNUTLS_SERVER).rawValue | GNUTLS_DATAGRAM.rawValue
        // Nonblocking: GnuTLS never waits for input, it returns GNUTLS_E_AGAIN.
        flags |= GNUTLS_NONBLOCK.rawValue | GNUTLS_NO_TICKETS.rawValue
        if role == .client, client?.configuration.certificateChainFile != nil || client?.configuration.identityMaterial != nil {
            flags |= GNUTLS_FORCE_CLIENT_CERT.rawValue
        }
        var created: gnutls_session_t?
        let rc = gnutls_init(&created, flags)
        guard rc == 0, let created else { throw .internalError(function: "gnutls_init", code: rc) }
        session = created
        do {
            try configureSession(mtu: mtu)
        } catch {
            gnutls_deinit(session)
            throw error
        }
    }

    deinit { gnutls_deinit(session) }

    /// A client connection to `serverName`, sent as SNI unless it is an IP literal, and the name
    /// the server's certificate must carry. `mtu` is the largest datagram to send (the path MTU
    /// less the IP and UDP headers).
    public static func client(
        context: DTLSClientContext, serverName: String, mtu: Int = DTLSConnection.defaultMTU
    ) throws(TLSError) -> DTLSConnection {
        try DTLSConnection(role: .client, serverName: serverName, client: context, server: nil, mtu: mtu)
    }

    /// A server connection for a client whose ClientHello passed the cookie check
    /// (`DTLSServerContext.checkCookie(in:from:)`); give it that ClientHello next.
    public static func server(
        context: DTLSServerContext, cookie: DTLSCookieCheck.Verified, mtu: Int = DTLSConnection.defaultMTU
    ) throws(TLSError) -> DTLSConnection {
        let connection = try DTLSConnection(role: .server, serverName: "", client: nil, server: context, mtu: mtu)
        var prestate = cookie.prestate
        gnutls_dtls_prestate_set(connection.session, &prestate)
        return connection
    }

    /// Recovers the connection from the pointer GnuTLS hands its callbacks.
    static func from(_ pointer: UnsafeMutableRawPointer?) -> DTLSConnection {
        Unmanaged<DTLSConnection>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// The largest datagram this connection sends. Setting it applies to the next record (and
    /// handshake flight); values below 100 or above 65507 are clamped.
    public var mtu: Int {
        get { Int(gnutls_dtls_get_mtu(session)) }
        set { gnutls_dtls_set_mtu(session, UInt32(min(max(newValue, 100), 65507))) }
    }

    /// How long GnuTLS retransmits handshake flights before the handshake fails (default 60 s,
    /// GnuTLS's); the first retransmission waits 1 s, each next one twice as long. Set it before
    /// the first `process`.
    public var handshakeTimeLimit: Duration = .seconds(60) {
        didSet {
            let milliseconds = handshakeTimeLimit.components.seconds * 1000 + handshakeTimeLimit.components.attoseconds / 1_000_000_000_000_000
            gnutls_dtls_set_timeouts(session, 1000, UInt32(clamping: max(milliseconds, 1)))
        }
    }

    /// The largest message `send` takes: what one record leaves of `mtu` under the negotiated
    /// cipher (an estimate before the handshake completes).
    public var maximumMessageSize: Int { Int(gnutls_dtls_get_data_mtu(session)) }

    /// While handshaking, how long until GnuTLS wants to retransmit its last flight: call
    /// `process` once it has passed. Nil when no retransmission is pending (established, failed,
    /// or a client not started).
    public var retransmissionTimeout: Duration? {
        guard case .handshaking = state else { return nil }
        return .milliseconds(Int(gnutls_dtls_get_timeout(session)))
    }

    /// The peer's certificate chain, leaf first, DER-encoded (empty: none presented).
    public var peerCertificateChain: [[UInt8]] { TLSSessionSetup.peerCertificateChain(of: session) }
}
