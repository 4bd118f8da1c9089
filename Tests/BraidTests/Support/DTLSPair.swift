import CBraid
import Glibc
@testable import BraidTLS

/// A DTLS client and server engine joined by an in-memory wire that can drop and reorder
/// datagrams. The server end exists once a ClientHello passes the cookie check, as a listener
/// would create it.
final class DTLSPair {
    let client: DTLSConnection
    let serverContext: DTLSServerContext
    private(set) var server: DTLSConnection?
    /// The bytes the server sees as the client's address (any bytes do, for cookies).
    var clientAddress: [UInt8] = [127, 0, 0, 1, 0x30, 0x39]
    var clientReceived: [[UInt8]] = []
    var serverReceived: [[UInt8]] = []
    var clientEvents: [TLSEvent] = []
    var serverEvents: [TLSEvent] = []
    var clientError: TLSError?
    var serverError: TLSError?
    /// HelloVerifyRequests the server's cookie check sent.
    private(set) var cookieReplies = 0
    /// Whether the wire loses a datagram: its sender and how many that sender sent before it.
    var loses: (DTLSConnection.Role, Int) -> Bool = { _, _ in false }
    /// Deliver each batch of datagrams in reverse order.
    var reverses = false
    private var sentCount: [DTLSConnection.Role: Int] = [:]
    private let mtu: Int
    /// Every datagram each end sent, in order (including lost ones).
    private(set) var wire: [(DTLSConnection.Role, [UInt8])] = []

    init(client: DTLSClientContext, server: DTLSServerContext, serverName: String = "localhost", mtu: Int = 1200) throws {
        self.client = try DTLSConnection.client(context: client, serverName: serverName, mtu: mtu)
        serverContext = server
        self.mtu = mtu
        // Short retransmission timers: the loss tests wait them out.
        gnutls_dtls_set_timeouts(self.client.session, 10, 60_000)
    }

    /// Processes both ends and moves their datagrams until nothing moves.
    func run(limit: Int = 100) {
        for _ in 0..<limit where step() == 0 {}
    }

    /// Runs, waiting out retransmission timers while the handshake is incomplete, until both
    /// ends completed or failed (or `limit` timers fired).
    func runThroughLoss(limit: Int = 50) {
        run()
        for _ in 0..<limit {
            let pending = [client.retransmissionTimeout, server?.retransmissionTimeout].compactMap { $0 }
            guard let wait = pending.min(), clientError == nil, serverError == nil else { return }
            // The driver's timer: the engine's own deadline, then a pass.
            let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
            usleep(UInt32(max(1, milliseconds + 1)) * 1000)
            run()
        }
    }

    /// One pass: returns how many datagrams moved.
    @discardableResult
    func step() -> Int {
        process(client, into: &clientReceived, events: &clientEvents, error: &clientError)
        if let server { process(server, into: &serverReceived, events: &serverEvents, error: &serverError) }
        var moved = 0
        var fromClient: [[UInt8]] = []
        while let datagram = client.popDatagram() { fromClient.append(datagram) }
        var fromServer: [[UInt8]] = []
        while let datagram = server?.popDatagram() { fromServer.append(datagram) }
        for datagram in ordered(fromClient) where deliverable(datagram, from: .client) {
            moved += 1
            deliverToServer(datagram)
        }
        for datagram in ordered(fromServer) where deliverable(datagram, from: .server) {
            moved += 1
            datagram.withUnsafeBytes { _ = client.receiveDatagram($0) }
        }
        return moved
    }

    private func ordered(_ batch: [[UInt8]]) -> [[UInt8]] { reverses ? batch.reversed() : batch }

    private func deliverable(_ datagram: [UInt8], from role: DTLSConnection.Role) -> Bool {
        precondition(datagram.count <= mtu, "a \(datagram.count)-byte datagram exceeds the MTU of \(mtu)")
        wire.append((role, datagram))
        let index = sentCount[role, default: 0]
        sentCount[role] = index + 1
        return !loses(role, index)
    }

    private func deliverToServer(_ datagram: [UInt8]) {
        if server == nil {
            switch datagram.withUnsafeBytes({ serverContext.checkCookie(in: $0, from: clientAddress) }) {
            case .drop: return
            case .reply(let reply):
                cookieReplies += 1
                reply.withUnsafeBytes { _ = client.receiveDatagram($0) }
                return
            case .verified(let cookie):
                do {
                    server = try DTLSConnection.server(context: serverContext, cookie: cookie, mtu: mtu)
                    gnutls_dtls_set_timeouts(server!.session, 10, 60_000)
                } catch {
                    serverError = error
                    return
                }
            }
        }
        datagram.withUnsafeBytes { _ = server!.receiveDatagram($0) }
    }

    private func process(_ connection: DTLSConnection, into received: inout [[UInt8]], events: inout [TLSEvent], error: inout TLSError?) {
        guard error == nil else { return }
        do {
            events += try connection.process { received.append(Array($0)) }
        } catch let failure {
            error = failure
        }
    }
}

enum DTLSFixtures {
    static func client(alpn: [String] = ["echo"], configure: (inout TLSClientConfiguration) -> Void = { _ in }) throws -> DTLSClientContext {
        var configuration = TLSClientConfiguration(alpn: alpn)
        configuration.verification = TLSCertificateVerification(trustRoots: .certificateAuthorityFile(Fixtures.caFile))
        configure(&configuration)
        return try DTLSClientContext(configuration: configuration)
    }

    static func server(
        alpn: [String] = ["echo"], certificate: String = "server", configure: (inout TLSServerConfiguration) -> Void = { _ in }
    ) throws -> DTLSServerContext {
        var configuration = TLSServerConfiguration(
            alpn: alpn, certificateChainFile: Fixtures.path("\(certificate).pem"), privateKeyFile: Fixtures.path("\(certificate)-key.pem"))
        configure(&configuration)
        return try DTLSServerContext(configuration: configuration)
    }
}
