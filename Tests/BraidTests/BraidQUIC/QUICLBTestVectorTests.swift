import Testing
@testable import BraidQUIC

/// QUIC-LB connection IDs against the published test vectors of
/// draft-ietf-quic-load-balancers-21 (section "Load Balancer Test Vectors", and the worked
/// four-pass example of "Encryption Example"): encoding the server ID and nonce gives the
/// vector's connection ID, and decoding it gives the server ID back.
@Suite struct QUICLBTestVectorTests {
    static func hex(_ string: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = string.startIndex
        while index < string.endIndex {
            let next = string.index(index, offsetBy: 2)
            bytes.append(UInt8(string[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    struct Vector: Sendable, CustomStringConvertible {
        let rotation: UInt8
        let serverID: String
        let nonce: String
        let cid: String
        /// The draft prints this vector's first octet without its config rotation bits (0x12
        /// where rotation 3 and length 18 make 0x72); the rest of the ID is checked as printed.
        var firstOctetMisprinted = false
        var description: String { "cr \(rotation) sid \(serverID)" }
    }

    static let vectorKey = "8f95f09245765f80256934e50c66207f"

    // The draft's second unencrypted vector is malformed (its nonce has an odd number of hex
    // digits and its CID does not contain it), so only the first is checked.
    static let unencrypted = [Vector(rotation: 0, serverID: "c4605e", nonce: "4504cc4f", cid: "07c4605e4504cc4f")]

    static let encrypted = [
        // 3 + 4 bytes: four passes, odd length (the halves share a byte).
        Vector(rotation: 0, serverID: "ed793a", nonce: "ee080dbf", cid: "0720b1d07b359d3c"),
        // 10 + 5 bytes: four passes, the server ID longer than the nonce.
        Vector(rotation: 1, serverID: "ed793a51d49b8f5fab65", nonce: "ee080dbf48", cid: "2fcc381bc74cb4fbad2823a3d1f8fed2"),
        // 8 + 8 bytes: the single-pass special case.
        Vector(rotation: 2, serverID: "ed793a51d49b8f5f", nonce: "ee080dbf48c0d1e5", cid: "504dd2d05a7b0de9b2b9907afb5ecf8cc3"),
        // 9 + 9 bytes: four passes, even length.
        Vector(
            rotation: 3, serverID: "ed793a51d49b8f5fab", nonce: "ee080dbf48c0d1e55d", cid: "125779c9cc86beb3a3a4a3ca96fce4bfe0cdbc",
            firstOctetMisprinted: true),
    ]

    func check(_ vector: Vector, key: String?) throws {
        let configuration = QUICLBConfiguration(
            configRotation: vector.rotation, serverID: Self.hex(vector.serverID), nonceLength: Self.hex(vector.nonce).count,
            key: key.map(Self.hex))
        let codec = try QUICLBCodec(configuration)
        var cid = Self.hex(vector.cid)
        if vector.firstOctetMisprinted {
            #expect(cid[0] == UInt8(cid.count - 1))
            cid[0] |= vector.rotation << 5
        }
        #expect(codec.encode(nonce: Self.hex(vector.nonce)) == cid)
        #expect(codec.serverID(in: cid) == Self.hex(vector.serverID))
    }

    @Test(arguments: unencrypted) func unencryptedVector(_ vector: Vector) throws {
        try check(vector, key: nil)
    }

    @Test(arguments: encrypted) func encryptedVector(_ vector: Vector) throws {
        try check(vector, key: Self.vectorKey)
    }

    @Test func fourPassWorkedExample() throws {
        try check(
            Vector(rotation: 0, serverID: "31441a", nonce: "9c69c275", cid: "0767947d29be054a"),
            key: "fdf726a9893ec05c0632d3956680baf0")
    }

    @Test func trailingBytesCountInTheLengthAndLeaveTheServerIDReadable() throws {
        let configuration = QUICLBConfiguration(
            configRotation: 2, serverID: Self.hex("ed793a"), nonceLength: 4, key: Self.hex(Self.vectorKey))
        let codec = try QUICLBCodec(configuration)
        let cid = codec.encode(nonce: Self.hex("ee080dbf"), trailing: [0x05])
        #expect(cid.count == 9)
        #expect(cid[0] == 2 << 5 | 8)
        #expect(cid.last == 0x05)
        #expect(codec.serverID(in: cid) == Self.hex("ed793a"))
    }

    @Test func limitsOfTheDraftAreEnforced() {
        #expect(throws: QUICError.self) { try QUICLBCodec(QUICLBConfiguration(configRotation: 7, serverID: [1], nonceLength: 4)) }
        #expect(throws: QUICError.self) { try QUICLBCodec(QUICLBConfiguration(configRotation: 0, serverID: [], nonceLength: 4)) }
        #expect(throws: QUICError.self) { try QUICLBCodec(QUICLBConfiguration(configRotation: 0, serverID: [1], nonceLength: 3)) }
        #expect(throws: QUICError.self) {
            try QUICLBCodec(QUICLBConfiguration(configRotation: 0, serverID: [UInt8](repeating: 1, count: 10), nonceLength: 10))
        }
        #expect(throws: QUICError.self) { try QUICLBCodec(QUICLBConfiguration(configRotation: 0, serverID: [1], nonceLength: 4, key: [1, 2])) }
    }
}
