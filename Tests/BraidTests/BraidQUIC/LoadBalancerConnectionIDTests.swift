import CBraid
import Testing
@testable import BraidQUIC

/// A server configured for a load balancer issues every connection ID (the first one, Retry's,
/// and those of NEW_CONNECTION_ID) with its server ID where the balancer reads it, and its loop
/// tag where the kernel filter reads it.
@Suite struct LoadBalancerConnectionIDTests {
    /// Reads the server ID as a balancer would, from the layouts as published (QUIC-LB draft-21
    /// in clear; Katran's `parse_quic`), not through Braid's encoder. Encrypted QUIC-LB IDs are
    /// decrypted by the codec the draft's test vectors check.
    static func balancerServerID(_ cid: [UInt8], format: QUICConnectionIDFormat) throws -> [UInt8]? {
        switch format {
        case .quicLB(let configuration) where configuration.key == nil:
            guard cid[0] >> 5 == configuration.configRotation else { return nil }
            return Array(cid[1...configuration.serverID.count])
        case .quicLB(let configuration):
            return try QUICLBCodec(configuration).serverID(in: cid)
        case .katran(let version, _):
            guard Int(cid[0] >> 6) == version.rawValue else { return nil }
            let id: UInt32 =
                switch version {
                case .v1: UInt32(cid[0] & 0x3f) << 10 | UInt32(cid[1]) << 2 | UInt32(cid[2]) >> 6
                case .v2: UInt32(cid[1]) << 16 | UInt32(cid[2]) << 8 | UInt32(cid[3])
                case .v3: UInt32(cid[1]) << 24 | UInt32(cid[2]) << 16 | UInt32(cid[3]) << 8 | UInt32(cid[4])
                }
            return withUnsafeBytes(of: id.bigEndian) { Array($0.suffix(version.rawValue + 1)) }
        default: return nil
        }
    }

    static func expectedServerID(_ format: QUICConnectionIDFormat) -> [UInt8]? {
        switch format {
        case .quicLB(let configuration): configuration.serverID
        case .katran(let version, let id): withUnsafeBytes(of: id.bigEndian) { Array($0.suffix(version.rawValue + 1)) }
        default: nil
        }
    }

    static let formats: [QUICConnectionIDFormat] = [
        .quicLB(QUICLBConfiguration(configRotation: 1, serverID: [0x0a, 0x0b], nonceLength: 6)),
        .quicLB(QUICLBConfiguration(configRotation: 2, serverID: [0xde, 0xad, 0xbe], nonceLength: 5, key: Array(0..<16))),
        .quicLB(QUICLBConfiguration(configRotation: 0, serverID: Array(1...8), nonceLength: 8, key: Array(16..<32))),
        .katran(.v1, serverID: 0xbeef),
        .katran(.v2, serverID: 0x12_3456),
        .katran(.v3, serverID: 0x89ab_cdef),
    ]

    /// Every connection ID the server connection holds now.
    static func serverIDs(of connection: QUICConnection) -> [[UInt8]] {
        var ids = [ngtcp2_cid](repeating: ngtcp2_cid(), count: ngtcp2_conn_get_num_scid(connection.conn))
        let count = ngtcp2_conn_get_scid(connection.conn, &ids)
        return ids.prefix(count).map { ConnectionID($0).bytes }
    }

    @Test(arguments: formats) func everyIssuedIDCarriesTheServerIDAndLoopTag(_ format: QUICConnectionIDFormat) throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.connectionIDFormat = format
        configuration.retry = .always
        let server = try QUICServerEndpoint(configuration: configuration, connectionIDTag: 3)
        let network = SimulatedNetwork(server: server)
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.handshakeConfirmed })
        #expect(server.retriesSent == 1)
        let serverSide = try #require(network.serverConnections.first)
        let ids = Self.serverIDs(of: serverSide)
        // The first ID and spares for migration (active_connection_id_limit).
        #expect(ids.count > 2)
        for id in ids {
            #expect(id.count == format.length)
            #expect(try Self.balancerServerID(id, format: format) == Self.expectedServerID(format))
            #expect(id[format.steeringOffset] == 3)
        }
        #expect(Set(ids).count == ids.count)
    }

    @Test func encryptedIDsDoNotRepeatTheirCiphertext() throws {
        let format = QUICConnectionIDFormat.quicLB(
            QUICLBConfiguration(configRotation: 0, serverID: [1, 2], nonceLength: 4, key: Array(0..<16)))
        let loops = try (0..<2).map { try ConnectionIDGenerator(format: format, loopTag: UInt8($0)) }
        var seen = Set<[UInt8]>()
        for _ in 0..<2000 {
            for generator in loops {
                let id = generator.next().bytes
                // Without the loop tag: two loops never use one nonce.
                #expect(seen.insert(Array(id.dropLast())).inserted)
                #expect(generator.serverID(in: id) == [1, 2])
            }
        }
    }

    @Test func anEncryptedConfigurationThatRunsOutOfNoncesIssuesUnroutableIDs() throws {
        // A 4-byte nonce is the loop tag and a 3-byte counter: 2^24 IDs per loop. Counting them
        // all would take a while, so this checks the mark of the unroutable IDs directly.
        let generator = try ConnectionIDGenerator(
            format: .quicLB(QUICLBConfiguration(configRotation: 0, serverID: [1], nonceLength: 4, key: Array(0..<16))), loopTag: 2)
        generator.exhaustNoncesForTesting()
        let id = generator.next().bytes
        #expect(id[0] >> 5 == 0b111)
        #expect(id.count == 7)
        #expect(id.last == 2)
    }

    /// Retry and handshake IDs (which any Initial, spoofed or not, can ask for) spend no counter
    /// nonce: they carry the server ID and the loop tag, also once every counter nonce is used.
    @Test func retryAndHandshakeIDsSpendNoNonceAndStayRoutable() throws {
        let format = QUICConnectionIDFormat.quicLB(QUICLBConfiguration(configRotation: 1, serverID: [7, 8], nonceLength: 4, key: Array(0..<16)))
        let generator = try ConnectionIDGenerator(format: format, loopTag: 3)
        for _ in 0..<1000 {
            let retry = generator.nextWithRandomNonce().bytes
            #expect(retry[0] >> 5 == 1)
            #expect(generator.serverID(in: retry) == [7, 8])
            #expect(retry.last == 3)
        }
        generator.exhaustNoncesForTesting()
        #expect(generator.next().bytes[0] >> 5 == 0b111)
        let retry = generator.nextWithRandomNonce().bytes
        #expect(retry[0] >> 5 == 1)
        #expect(generator.serverID(in: retry) == [7, 8])
    }

    /// Counter nonces and random ones come from the two halves of the space (the top bit
    /// after the loop tag), so an ID with a random nonce can never be a counter's, however
    /// long the counter runs.
    @Test func counterAndRandomNoncesNeverMeet() throws {
        let configuration = QUICLBConfiguration(configRotation: 2, serverID: [9], nonceLength: 4, key: Array(0..<16))
        let generator = try ConnectionIDGenerator(format: .quicLB(configuration), loopTag: 5)
        let codec = try QUICLBCodec(configuration)
        for _ in 0..<2000 {
            let counted = try #require(codec.nonce(in: generator.next().bytes))
            let random = try #require(codec.nonce(in: generator.nextWithRandomNonce().bytes))
            #expect(counted[0] == 5 && random[0] == 5, "the loop tag leads every nonce")
            #expect(counted[1] & 0x80 == 0, "\(counted)")
            #expect(random[1] & 0x80 != 0, "\(random)")
        }
    }

    @Test func invalidFormatsAreRefusedWithAReason() {
        #expect(throws: QUICError.self) { try QUICConnectionIDFormat.katran(.v1, serverID: 0x1_0000).validate() }
        #expect(throws: QUICError.self) { try QUICConnectionIDFormat.katran(.v2, serverID: 0).validate() }
        #expect(throws: QUICError.self) { try QUICConnectionIDFormat.awsNetworkLoadBalancer(serverID: 1).validate() }
        // 19 bytes of QUIC-LB leave no room for the loop tag.
        #expect(throws: QUICError.self) {
            try QUICConnectionIDFormat.quicLB(QUICLBConfiguration(configRotation: 0, serverID: Array(0..<10), nonceLength: 9)).validate()
        }
    }

    /// A short header for a connection this server does not hold gets a stateless reset only
    /// when its ID carries this server's ID; another server's ID is dropped silently.
    @Test(arguments: [
        QUICConnectionIDFormat.quicLB(QUICLBConfiguration(configRotation: 1, serverID: [5, 5], nonceLength: 6, key: Array(0..<16))),
        .katran(.v2, serverID: 77),
    ])
    func strangersGetAResetOnlyWhenTheIDIsOurs(_ format: QUICConnectionIDFormat) throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.connectionIDFormat = format
        let server = try QUICServerEndpoint(configuration: configuration)
        let other: QUICConnectionIDFormat =
            switch format {
            case .quicLB(var lb): { lb.serverID = [6, 6]; return .quicLB(lb) }()
            default: .katran(.v2, serverID: 78)
            }
        let path = QUICPath(local: QUICAddress(ip: "127.0.0.1", port: 4433)!, remote: QUICAddress(ip: "127.0.0.2", port: 5000)!)
        let now = QUICInstant(nanoseconds: 1_000_000_000)
        let foreign = try ConnectionIDGenerator(format: other, loopTag: 0).next()
        #expect(server.receive(datagram: [0x40] + foreign.bytes + [UInt8](repeating: 0x33, count: 60), path: path, now: now) == nil)
        #expect(server.statelessResetsSent == 0)
        #expect(server.strangersDropped == 1)
        let ours = try ConnectionIDGenerator(format: format, loopTag: 0).next()
        #expect(server.receive(datagram: [0x40] + ours.bytes + [UInt8](repeating: 0x33, count: 60), path: path, now: now) == nil)
        #expect(server.statelessResetsSent == 1)
        #expect(server.pollEndpointTransmits().count == 1)
    }
}
