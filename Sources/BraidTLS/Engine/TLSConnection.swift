import CBraid

/// One TLS connection over a byte stream, sans IO: ciphertext in, plaintext out and back, with no
/// sockets, clock reads or threads. GnuTLS reads and writes this object's memory buffers.
///
/// Owned by one event loop (not `Sendable`). A driver's pass over one connection:
/// 1. `withInputSpace(minimum:_:)`: read the socket straight into the engine. When it returns 0
///    without calling the body, the input is full: call `process` first (or stop reading).
/// 2. `process(deliver:)`: advances the handshake and hands out, in order, every complete record's
///    plaintext (a server's 0-RTT data first), plus events. A `TLSError` thrown here is final; the
///    alert telling the peer why is queued, so flush the output before closing the socket.
/// 3. `send(_:)` after `.handshakeCompleted`: encrypts and queues; it stops early once
///    `pendingCiphertextLimit` bytes are pending, which is the driver's cue to wait for the socket.
/// 4. `withPendingCiphertext(_:)`: write the pending ciphertext to the socket, partially if need be.
/// 5. `close()` queues close_notify; `endOfInput()` when the socket reads EOF tells a clean close
///    from a truncation.
///
/// A client's handshake starts at its first `process` call; `sendEarlyData` must come before it.
///
/// The ciphertext buffers hold memory only while they hold bytes: a connection with nothing
/// received and unprocessed and nothing pending to write (idle, or waiting for its peer) holds
/// none; emptied buffers' memory is kept for reuse per thread, a few blocks at most.
///
/// ```swift
/// let connection = try TLSConnection.client(context: context, serverName: "example.com")
/// _ = try connection.process { _ in }  // the first call queues the ClientHello
/// connection.withPendingCiphertext { bytes in max(0, write(fd, bytes.baseAddress, bytes.count)) }
/// ```
public final class TLSConnection {
    /// Which end of the connection this is.
    public enum Role: Sendable, Hashable { case client, server }

    /// Most unprocessed ciphertext the engine holds (`withInputSpace` offers no more room): four
    /// full records, so a 64 KiB socket read fits beside a partial record.
    public static let inputCapacity = 4 * maxCiphertextRecord
    /// `send` stops encrypting once this many ciphertext bytes wait to be written.
    public static let pendingCiphertextLimit = 64 * 1024
    /// Largest plaintext per record (TLS's maximum, RFC 8446 §5.1).
    static let maxRecordPayload = 16384
    /// Largest record on the wire: payload, header, and TLS 1.2's worst-case expansion.
    static let maxCiphertextRecord = 16384 + 2048 + 5

    public let role: Role
    /// The name the client sent as SNI and checked the certificate against ("" on a server).
    public let serverName: String
    let session: gnutls_session_t
    /// Memory only while bytes are in it (see `CiphertextBuffer`): an idle connection holds none.
    let input = CiphertextBuffer(blockCapacity: TLSConnection.inputCapacity)
    let output = CiphertextBuffer(blockCapacity: TLSConnection.pendingCiphertextLimit + TLSConnection.maxCiphertextRecord)
    /// Plaintext from `sendCoalescing` waiting to share a record with what follows it (the
    /// same on-demand buffer, holding plaintext here): at most one record's payload.
    let coalesced = CiphertextBuffer(blockCapacity: TLSConnection.maxRecordPayload)
    /// Keeps alive what the session points into (credentials, ticket key, anti-replay context).
    let clientContext: TLSClientContext?
    let serverContext: TLSServerContext?

    enum State {
        /// Client before its first `process`: `sendEarlyData` is still possible.
        case notStarted
        case handshaking
        /// Handshake done, waiting for the caller's verdict on the peer (`callerVerifiesPeer`).
        case awaitingVerdict
        case established
        case failed(TLSError)
    }
    var state: State
    /// The transport ended (`endOfInput`): the pull function reports EOF instead of "try again".
    var inputEnded = false
    /// The caller accepted the peer: the next `process` reports `.handshakeCompleted`.
    var announcesCompletion = false
    /// Our own certificate check failed (set inside GnuTLS's verify callback).
    var certificateProblem: CertificateProblem?
    /// Server: the ALPN list from the client's hello, for `alpnMismatch` (nil: it sent none).
    var clientOfferedALPN: [String]?
    /// Server: the TLS versions the client's hello offers (of those Braid knows).
    var clientOfferedVersions: Set<TLSVersion>?
    /// Server: the ClientHello has been processed (the anti-replay context is no longer touched).
    var clientHelloProcessed = false
    /// Client: a NewSessionTicket arrived and has not been turned into an event yet.
    var ticketArrived = false
    /// Client: the max_early_data_size of the last NewSessionTicket (0: none offered).
    var ticketMaxEarlyData = 0
    /// Client: when the last NewSessionTicket arrived and its lifetime.
    var ticketValidity: TLSTicketValidity?
    /// Client: the ticket we resume with, and a copy of the 0-RTT bytes sent under it.
    package let resumption: TLSSessionTicket?
    var earlyData: [UInt8] = []
    /// Server: where 0-RTT plaintext is copied on its way to `deliver` (allocated when needed).
    var earlyDataScratch: UnsafeMutableRawBufferPointer?

    /// The peer sent close_notify.
    public internal(set) var peerClosed = false
    /// We queued close_notify.
    public internal(set) var closeSent = false
    /// The handshake is complete and application data flows.
    public var isHandshakeComplete: Bool { if case .established = state { true } else { false } }
    /// The ALPN protocol agreed on (nil: none), once known.
    public internal(set) var negotiatedALPN: String?
    /// The TLS version agreed on, once the handshake completed.
    public internal(set) var negotiatedVersion: TLSVersion?
    /// The handshake resumed an earlier session (abbreviated, with a ticket).
    public internal(set) var isResumed = false
    /// Client: the server accepted our 0-RTT data. Server: we accepted the client's.
    public internal(set) var earlyDataAccepted = false
    /// The caller, not the engine, judges the peer's certificate (its client's or server's
    /// configuration says so): the handshake stops at `.peerAwaitingVerdict`.
    var callerVerifiesPeer: Bool {
        clientContext?.configuration.callerVerifiesPeer ?? serverContext?.configuration.callerVerifiesPeer ?? false
    }
    /// The error that ended the connection, if one did.
    public var failure: TLSError? { if case .failed(let error) = state { error } else { nil } }

    init(role: Role, serverName: String, client: TLSClientContext?, server: TLSServerContext?, resumption: TLSSessionTicket?)
        throws(TLSError)
    {
        self.role = role
        self.serverName = serverName
        clientContext = client
        serverContext = server
        self.resumption = resumption
        state = role == .client ? .notStarted : .handshaking
        var flags = (role == .client ? GNUTLS_CLIENT : GNUTLS_SERVER).rawValue
        // Nonblocking: GnuTLS never waits on a clock for input, it returns GNUTLS_E_AGAIN.
        flags |= GNUTLS_NONBLOCK.rawValue
        if role == .client {
            flags |= TLSKeyExchange.clientSessionFlags
            if client?.configuration.sessionTicketsEnabled == false { flags |= GNUTLS_NO_TICKETS.rawValue }
            // Send our certificate even if it names no CA the server listed: a clear rejection
            // beats a silent missing certificate.
            if client?.configuration.certificateChainFile != nil || client?.configuration.identityMaterial != nil {
                flags |= GNUTLS_FORCE_CLIENT_CERT.rawValue
            }
        } else if let server {
            if !server.configuration.sessionTicketsEnabled { flags |= GNUTLS_NO_TICKETS.rawValue }
            if server.configuration.earlyDataEnabled { flags |= GNUTLS_ENABLE_EARLY_DATA.rawValue }
        }
        var created: gnutls_session_t?
        let rc = gnutls_init(&created, flags)
        guard rc == 0, let created else { throw .internalError(function: "gnutls_init", code: rc) }
        session = created
        do {
            try configureSession()
        } catch {
            gnutls_deinit(session)
            throw error
        }
    }

    deinit {
        gnutls_deinit(session)
        earlyDataScratch?.deallocate()
    }

    /// A client connection to `serverName`, sent as SNI unless it is an IP literal, and the name
    /// the server's certificate must carry. With a `resumption` ticket issued for the same name,
    /// the connection resumes (and may send 0-RTT data with `sendEarlyData`); a ticket for another
    /// name, or one past (or near the end of) its lifetime, is ignored: a full handshake.
    public static func client(
        context: TLSClientContext, serverName: String, resumption: TLSSessionTicket? = nil
    ) throws(TLSError) -> TLSConnection {
        // A caller that judges the server itself is asked on every connection: no resumption.
        // A stale ticket (see `TLSTicketValidity`) means a full handshake.
        let usable =
            context.configuration.callerVerifiesPeer
            ? nil : resumption.flatMap { $0.serverName == serverName && $0.isUsable() ? $0 : nil }
        return try TLSConnection(role: .client, serverName: serverName, client: context, server: nil, resumption: usable)
    }

    /// A server connection, for one accepted TCP connection.
    public static func server(context: TLSServerContext) throws(TLSError) -> TLSConnection {
        try TLSConnection(role: .server, serverName: "", client: nil, server: context, resumption: nil)
    }

    /// Recovers the connection from the pointer GnuTLS hands its callbacks.
    static func from(_ pointer: UnsafeMutableRawPointer?) -> TLSConnection {
        Unmanaged<TLSConnection>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// The peer's certificate chain, leaf first, DER-encoded (empty: none presented).
    public var peerCertificateChain: [[UInt8]] { TLSSessionSetup.peerCertificateChain(of: session) }
}
