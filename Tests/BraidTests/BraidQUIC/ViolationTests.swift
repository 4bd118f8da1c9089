import CBraid
import Testing
@testable import BraidQUIC

/// A peer that breaks the server's limits gets a CONNECTION_CLOSE with the transport error
/// RFC 9000 names (§4.6 STREAM_LIMIT_ERROR, §4.1 FLOW_CONTROL_ERROR), at once, and the server
/// stops serving that connection.
///
/// The hostile peer is an ordinary client engine resuming with a forged ticket: its remembered
/// server limits are inflated, so its 0-RTT data honours limits the server never granted
/// (ngtcp2 itself would never send past the limits it knows).
@Suite struct ViolationTests {
    /// The server's small limits, which the forged ticket overstates.
    static let streams: UInt64 = 2
    static let streamWindow: UInt64 = 4000
    static let connectionWindow: UInt64 = 6000

    struct Outcome {
        var server: QUICError?
        var client: QUICError?
        /// Virtual time from the client's first flight to the close reaching it.
        var clientClosedAfter: Duration?
        var oneWayDelay: Duration
    }

    /// Resumes with a ticket claiming generous limits, runs `violate` on the client before its
    /// first flight, and reports how each side's connection ended.
    func violate(_ violate: (QUICConnection) throws -> Void) throws -> Outcome {
        let server = try Fixtures.server {
            $0.transport.initialMaxBidirectionalStreams = Self.streams
            $0.transport.initialMaxStreamDataBidirectionalRemote = Self.streamWindow
            $0.transport.initialMaxData = Self.connectionWindow
        }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        var ticket: QUICResumptionTicket?
        network.onEvent = { connection, event in
            if case .resumptionTicket(let issued) = event, connection.role == .client { ticket = issued }
        }
        let first = try network.connect(context)
        #expect(network.run { first.isEstablished && ticket != nil })
        first.close(now: network.now)
        network.settle()

        var forged = try #require(ticket)
        // Fields: bidi streams, uni streams, bidi local, bidi remote, uni, data, CIDs, datagram.
        #expect(forged.transportParameters.fields[0] == Self.streams, "the real ticket remembers the real limit")
        forged.transportParameters.fields[0] = 1000
        forged.transportParameters.fields[3] = 1 << 20
        forged.transportParameters.fields[5] = 1 << 24

        var outcome = Outcome(oneWayDelay: network.conditions.oneWayDelay)
        let start = network.now
        network.onEvent = { connection, event in
            guard case .connectionClosed(let reason) = event else { return }
            if connection.role == .server {
                outcome.server = reason
            } else {
                outcome.client = reason
                outcome.clientClosedAfter = network.now - start
            }
        }
        let client = try network.connect(context, resumption: forged)
        try violate(client)
        #expect(network.run(for: .seconds(5)) { outcome.client != nil && outcome.server != nil })
        // The server keeps the connection only for its closing period (3 PTO), then drops it.
        #expect(network.run(for: .seconds(10)) { network.serverConnections.isEmpty }, "the server must not keep the broken connection")
        // The endpoint goes on serving everyone else.
        let next = try network.connect(context)
        #expect(network.run { next.isEstablished }, "a new client after the violation: \(String(describing: next.closeReason))")
        return outcome
    }

    func expectClosed(_ outcome: Outcome, code: UInt64) {
        guard case .transportError(code, _, byPeer: false) = outcome.server else {
            Issue.record("server side ended with \(String(describing: outcome.server)), not transport error 0x\(String(code, radix: 16))")
            return
        }
        guard case .transportError(code, _, byPeer: true) = outcome.client else {
            Issue.record("client side ended with \(String(describing: outcome.client)), not the server's 0x\(String(code, radix: 16))")
            return
        }
        // The close answers the violating flight: one round trip, far inside one PTO.
        #expect(outcome.clientClosedAfter.map { $0 <= outcome.oneWayDelay * 2 } == true, "closed after \(String(describing: outcome.clientClosedAfter))")
    }

    @Test func openingMoreStreamsThanAllowedIsStreamLimitError() throws {
        let outcome = try violate { client in
            for _ in 0...Self.streams {
                let id = try client.openStream(bidirectional: true)
                try client.send(streamID: id, bytes: [1, 2, 3], fin: false)
            }
        }
        expectClosed(outcome, code: 0x4)
        #expect(outcome.server?.description.contains("STREAM_LIMIT_ERROR") == true, "\(String(describing: outcome.server))")
    }

    @Test func sendingPastTheStreamWindowIsFlowControlError() throws {
        let outcome = try violate { client in
            let id = try client.openStream(bidirectional: true)
            try client.send(streamID: id, bytes: pattern(seed: 1, count: Int(Self.streamWindow) + 500), fin: false)
        }
        expectClosed(outcome, code: 0x3)
        #expect(outcome.server?.description.contains("FLOW_CONTROL_ERROR") == true, "\(String(describing: outcome.server))")
    }

    @Test func sendingPastTheConnectionWindowIsFlowControlError() throws {
        let outcome = try violate { client in
            // Each stream stays inside its own window; together they overrun the connection's.
            for index in 0..<Self.streams {
                let id = try client.openStream(bidirectional: true)
                try client.send(streamID: id, bytes: pattern(seed: index, count: Int(Self.streamWindow) - 500), fin: false)
            }
        }
        expectClosed(outcome, code: 0x3)
    }

    /// Every error `read_pkt` returns ends the connection with the matching code: none is left
    /// half-served (ngtcp2 0.12.1 calls most protocol errors non-fatal, yet expects a close).
    /// An error `read_pkt` returns and the transport error code (RFC 9000 §20.1) it must close with.
    struct ReadError: Sendable, CustomTestStringConvertible {
        var error: Int32
        var code: UInt64
        var testDescription: String { "\(String(cString: ngtcp2_strerror(error))) -> 0x\(String(code, radix: 16))" }
    }

    static let readErrors: [ReadError] = [
        ReadError(error: NGTCP2_ERR_STREAM_LIMIT, code: 0x4), ReadError(error: NGTCP2_ERR_FLOW_CONTROL, code: 0x3),
        ReadError(error: NGTCP2_ERR_FINAL_SIZE, code: 0x6), ReadError(error: NGTCP2_ERR_STREAM_STATE, code: 0x5),
        ReadError(error: NGTCP2_ERR_FRAME_ENCODING, code: 0x7), ReadError(error: NGTCP2_ERR_ACK_FRAME, code: 0x7),
        ReadError(error: NGTCP2_ERR_PROTO, code: 0xa), ReadError(error: NGTCP2_ERR_TRANSPORT_PARAM, code: 0x8),
        ReadError(error: NGTCP2_ERR_MALFORMED_TRANSPORT_PARAM, code: 0x8),
        ReadError(error: NGTCP2_ERR_CONNECTION_ID_LIMIT, code: 0x9),
        ReadError(error: NGTCP2_ERR_CRYPTO_BUFFER_EXCEEDED, code: 0xd),
        ReadError(error: NGTCP2_ERR_AEAD_LIMIT_REACHED, code: 0xf), ReadError(error: NGTCP2_ERR_NO_VIABLE_PATH, code: 0x10),
        ReadError(error: NGTCP2_ERR_CALLBACK_FAILURE, code: 0x1),
    ]

    /// Every error `read_pkt` returns ends the connection with the matching code: none is left
    /// half-served (ngtcp2 0.12.1 calls most protocol errors non-fatal, yet expects a close).
    @Test(arguments: readErrors)
    func everyReadErrorClosesWithItsTransportCode(_ readError: ReadError) throws {
        let (error, code) = (readError.error, readError.code)
        let network = SimulatedNetwork(server: try Fixtures.server())
        var serverReason: QUICError?
        var clientReason: QUICError?
        network.onEvent = { connection, event in
            guard case .connectionClosed(let reason) = event else { return }
            if connection.role == .server { serverReason = reason } else { clientReason = reason }
        }
        let client = try network.connect(try Fixtures.client())
        #expect(network.run { client.isEstablished && network.serverConnections.first?.isEstablished == true })
        let serverSide = try #require(network.serverConnections.first)
        serverSide.handleReadError(error, now: network.now)
        #expect(serverSide.isClosed)
        #expect(network.run(for: .seconds(5)) { clientReason != nil })
        guard case .transportError(code, _, byPeer: false) = serverReason else {
            Issue.record("\(error): server ended with \(String(describing: serverReason))")
            return
        }
        guard case .transportError(code, _, byPeer: true) = clientReason else {
            Issue.record("\(error): client ended with \(String(describing: clientReason))")
            return
        }
    }
}
