/// Issues one endpoint's connection IDs in its `QUICConnectionIDFormat`, with its loop tag.
/// Belongs to the endpoint's thread (it holds the QUIC-LB cipher and nonce counter).
package final class ConnectionIDGenerator {
    package let format: QUICConnectionIDFormat
    /// The loop byte every ID carries at `format.steeringOffset` (0 without a group).
    package let loopTag: UInt8
    private let codec: QUICLBCodec?
    /// Encrypted QUIC-LB: the counter part of the nonce (after the loop tag), and how many
    /// nonces are left before it would come back to its random start (nil: more than 2^64).
    private var counter: [UInt8] = []
    private var noncesLeft: UInt64?

    package init(format: QUICConnectionIDFormat, loopTag: UInt8?) throws(QUICError) {
        try format.validate()
        self.format = format
        self.loopTag = loopTag ?? 0
        if case .quicLB(let configuration) = format {
            codec = try QUICLBCodec(configuration)
            if configuration.key != nil {
                counter = [UInt8](repeating: 0, count: configuration.nonceLength - 1)
                fillRandom(&counter)
                counter[0] &= 0x7f
                noncesLeft = counter.count < 8 ? UInt64(1) << (8 * counter.count - 1) : nil
            }
        } else {
            codec = nil
        }
    }

    package var length: Int { format.length }

    /// A fresh connection ID.
    package func next() -> ConnectionID {
        ConnectionID(bytes: nextBytes())
    }

    /// A connection ID for a packet that anyone can make the server send: the source ID of a
    /// Retry (one spoofed Initial each) or of a handshake's first packets (one Initial from
    /// any address each). Routable like every other ID, but for encrypted QUIC-LB its nonce is
    /// random rather than the counter's next, so such packets never spend the finite nonce
    /// space: only IDs issued after a completed handshake (NEW_CONNECTION_ID) do. Random
    /// nonces have the counter part's top bit set and counter nonces have it clear, so the two
    /// never meet; `isInUse` keeps a random one off a live connection's ID.
    package func nextWithRandomNonce(avoiding isInUse: (ConnectionID) -> Bool = { _ in false }) -> ConnectionID {
        guard case .quicLB(let configuration) = format, configuration.key != nil, let codec else { return next() }
        var random = [UInt8](repeating: 0, count: configuration.nonceLength - 1)
        while true {
            fillRandom(&random)
            random[0] |= 0x80
            let id = ConnectionID(bytes: codec.encode(nonce: [loopTag] + random, trailing: [loopTag]))
            if !isInUse(id) { return id }
        }
    }

    private func nextBytes() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: format.length)
        fillRandom(&bytes)
        switch format {
        case .random, .awsNetworkLoadBalancer:
            bytes[0] = loopTag
            return bytes
        case .katran(let version, let serverID):
            switch version {
            case .v1:
                bytes[0] = 0x40 | UInt8(truncatingIfNeeded: serverID >> 10) & 0x3f
                bytes[1] = UInt8(truncatingIfNeeded: serverID >> 2)
                bytes[2] = UInt8(truncatingIfNeeded: serverID << 6) | bytes[2] & 0x3f
            case .v2:
                bytes[0] = 0x80 | bytes[0] & 0x3f
                bytes[1] = UInt8(truncatingIfNeeded: serverID >> 16)
                bytes[2] = UInt8(truncatingIfNeeded: serverID >> 8)
                bytes[3] = UInt8(truncatingIfNeeded: serverID)
            case .v3:
                bytes[0] = 0xc0 | bytes[0] & 0x3f
                bytes[1] = UInt8(truncatingIfNeeded: serverID >> 24)
                bytes[2] = UInt8(truncatingIfNeeded: serverID >> 16)
                bytes[3] = UInt8(truncatingIfNeeded: serverID >> 8)
                bytes[4] = UInt8(truncatingIfNeeded: serverID)
            }
            bytes[version.serverIDEnd] = loopTag
            return bytes
        case .quicLB(let configuration):
            let codec = codec!
            guard configuration.key != nil else {
                return codec.encode(nonce: Array(bytes[1...configuration.nonceLength]), trailing: [loopTag])
            }
            if let left = noncesLeft {
                guard left > 0 else { return unroutable(bytes, length: configuration.plaintextLength) }
                noncesLeft = left - 1
            }
            let nonce = [loopTag] + counter
            increment(&counter)
            return codec.encode(nonce: nonce, trailing: [loopTag])
        }
    }

    /// Config rotation 0b111 ("route me by address"), the length, random bytes, the loop tag.
    private func unroutable(_ random: [UInt8], length: Int) -> [UInt8] {
        var bytes = random
        bytes[0] = 0xe0 | UInt8(length + 1) & 0x1f
        bytes[bytes.count - 1] = loopTag
        return bytes
    }

    /// Tests: as if every nonce had been used.
    func exhaustNoncesForTesting() { noncesLeft = 0 }

    /// The next counter value, its top bit kept clear (wrapping within that half).
    private func increment(_ counter: inout [UInt8]) {
        for index in counter.indices.reversed() {
            counter[index] &+= 1
            if counter[index] != 0 { break }
        }
        counter[0] &= 0x7f
    }

    /// The server ID an ID of this generator's format carries (QUIC-LB: decrypted), or nil for
    /// `.random` and IDs that do not decode.
    /// Katran server IDs come back big-endian, 2, 3 or 4 bytes wide.
    package func serverID(in cid: [UInt8]) -> [UInt8]? {
        switch format {
        case .random, .awsNetworkLoadBalancer: return nil
        case .quicLB: return codec?.serverID(in: cid)
        case .katran(let version, _):
            guard cid.count >= version.serverIDEnd, Int(cid[0] >> 6) == version.rawValue else { return nil }
            let value: UInt32
            switch version {
            case .v1: value = UInt32(cid[0] & 0x3f) << 10 | UInt32(cid[1]) << 2 | UInt32(cid[2] >> 6)
            case .v2: value = UInt32(cid[1]) << 16 | UInt32(cid[2]) << 8 | UInt32(cid[3])
            case .v3: value = UInt32(cid[1]) << 24 | UInt32(cid[2]) << 16 | UInt32(cid[3]) << 8 | UInt32(cid[4])
            }
            return Self.bigEndian(value, width: version.rawValue + 1)
        }
    }

    /// This generator's own server ID, in the form `serverID(in:)` returns.
    package var ownServerID: [UInt8]? {
        switch format {
        case .random, .awsNetworkLoadBalancer: nil
        case .quicLB(let configuration): configuration.serverID
        case .katran(let version, let serverID): Self.bigEndian(serverID, width: version.rawValue + 1)
        }
    }

    private static func bigEndian(_ value: UInt32, width: Int) -> [UInt8] {
        (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * (width - 1 - $0))) }
    }
}
