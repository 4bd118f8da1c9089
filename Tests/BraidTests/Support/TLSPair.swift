import BraidTLS

/// One end of an in-memory TLS connection: the engine plus everything it handed out.
final class TLSEnd {
    let connection: TLSConnection
    var received: [UInt8] = []
    var events: [TLSEvent] = []
    var error: TLSError?
    /// Called with each piece of plaintext as it is delivered (e.g. to echo it).
    var onData: ((TLSEnd, UnsafeRawBufferPointer) -> Void)?
    /// Bytes still to send, fed to `send` as backpressure allows.
    var outgoing: [UInt8] = []
    var outgoingOffset = 0

    init(_ connection: TLSConnection) { self.connection = connection }

    var sessionTickets: [TLSSessionTicket] {
        events.compactMap { if case .sessionTicket(let ticket) = $0 { ticket } else { nil } }
    }

    func process() {
        guard error == nil else { return }
        do {
            events += try connection.process { bytes in
                received.append(contentsOf: bytes)
                onData?(self, bytes)
            }
        } catch {
            self.error = error
        }
        flushOutgoing()
    }

    /// Sends what `outgoing` still holds, as far as the engine takes it.
    func flushOutgoing() {
        guard error == nil, connection.isHandshakeComplete, outgoingOffset < outgoing.count else { return }
        do {
            let taken = try outgoing.withUnsafeBytes { try connection.send(UnsafeRawBufferPointer(rebasing: $0[outgoingOffset...])) }
            outgoingOffset += taken
        } catch {
            self.error = error as? TLSError
        }
    }
}

/// A client and a server `TLSConnection` joined by an in-memory wire: `run()` moves ciphertext
/// both ways (partial writes included, through the engines' bounded input) and processes both
/// ends until nothing moves.
final class TLSPair {
    let client: TLSEnd
    let server: TLSEnd
    /// Ciphertext bytes that crossed the wire, client to server and back.
    private(set) var bytesToServer = 0
    private(set) var bytesToClient = 0

    init(client: TLSConnection, server: TLSConnection) {
        self.client = TLSEnd(client)
        self.server = TLSEnd(server)
    }

    convenience init(client: TLSClientContext, server: TLSServerContext, serverName: String = "localhost", resumption: TLSSessionTicket? = nil) throws {
        try self.init(
            client: TLSConnection.client(context: client, serverName: serverName, resumption: resumption),
            server: TLSConnection.server(context: server))
    }

    func run(maxRounds: Int = 100_000) {
        client.process()
        for _ in 0..<maxRounds {
            let toServer = transfer(from: client, to: server)
            server.process()
            let toClient = transfer(from: server, to: client)
            client.process()
            bytesToServer += toServer
            bytesToClient += toClient
            let stillSending = [client, server].contains { $0.error == nil && $0.connection.isHandshakeComplete && $0.outgoingOffset < $0.outgoing.count }
            if toServer == 0 && toClient == 0 && !stillSending { return }
        }
    }

    /// Moves as much pending ciphertext as the receiver's input takes; returns the byte count.
    @discardableResult
    func transfer(from sender: TLSEnd, to receiver: TLSEnd) -> Int {
        var moved = 0
        while sender.connection.pendingCiphertextCount > 0 {
            let n = sender.connection.withPendingCiphertext { receiver.connection.receiveCiphertext($0) }
            if n == 0 { break }
            moved += n
        }
        return moved
    }
}

/// Contexts over the test PKI (Tests/BraidTests/Fixtures).
enum TLSFixtures {
    static func client(alpn: [String] = ["echo"], configure: (inout TLSClientConfiguration) -> Void = { _ in }) throws -> TLSClientContext {
        var configuration = TLSClientConfiguration(alpn: alpn)
        configuration.verification = TLSCertificateVerification(trustRoots: .certificateAuthorityFile(Fixtures.caFile))
        configure(&configuration)
        return try TLSClientContext(configuration: configuration)
    }

    static func server(
        alpn: [String] = ["echo"], certificate: String = "server", configure: (inout TLSServerConfiguration) -> Void = { _ in }
    ) throws -> TLSServerContext {
        var configuration = TLSServerConfiguration(
            alpn: alpn, certificateChainFile: Fixtures.path("\(certificate).pem"),
            privateKeyFile: Fixtures.path("\(certificate)-key.pem"))
        configure(&configuration)
        return try TLSServerContext(configuration: configuration)
    }
}

/// Where two byte arrays first differ (nil: equal), so a failed comparison of megabytes prints
/// one index instead of both arrays.
func firstDifference(_ a: [UInt8], _ b: [UInt8]) -> Int? {
    if a == b { return nil }
    if let index = zip(a.indices, zip(a, b)).first(where: { $0.1.0 != $0.1.1 })?.0 { return index }
    return a.count == b.count ? nil : min(a.count, b.count)
}
