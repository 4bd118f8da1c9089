/// How a server lays out the connection IDs it issues, so that a load balancer in front of
/// several servers can route every packet, migrated or not, to the server holding its
/// connection. Every format also carries the host's loop tag (one byte, at `steeringOffset`):
/// the kernel filter of `QUICServerGroup` steers short headers to the loop's socket by it.
///
/// Lengths and entropy (the loop tag is the same for every ID of one loop):
/// - `.random`: 16 bytes, the tag first, 15 random bytes.
/// - `.quicLB`: 1 + server ID + nonce + 1 bytes (the tag last, after the QUIC-LB part, which
///   balancers ignore). In clear the nonce is random; encrypted, it is the tag then a counter
///   that starts at a random value (the draft forbids reusing a nonce under one key) with its
///   top bit clear, so a loop issues half of 256^(nonce − 1) IDs after handshakes before it runs
///   out; after that it issues unroutable IDs (config rotation 7, random bytes), which
///   balancers route by address, until it is given a new configuration. Retry and handshake
///   IDs, which any Initial can ask for, take random nonces with that bit set instead.
/// - `.katran`: 16 bytes: 2 version bits and the server ID (16 bits from bit 2 in version 1;
///   24 bits from byte 1 in version 2; 32 bits from byte 1 in version 3), the tag right after
///   the server ID, the rest random.
package enum QUICConnectionIDFormat: Sendable, Hashable {
    /// Random IDs (no load balancer reads them).
    case random
    /// draft-ietf-quic-load-balancers, in clear or encrypted.
    case quicLB(QUICLBConfiguration)
    /// Katran's connection-ID versions (its balancer reads the version from the top 2 bits).
    case katran(KatranConnectionIDVersion, serverID: UInt32)
    /// AWS Network Load Balancer's QUIC passthrough with this 8-byte server ID: refused, since
    /// the layout of the server ID inside the connection ID is not documented precisely.
    case awsNetworkLoadBalancer(serverID: UInt64)

    /// Length of every ID of this format.
    package var length: Int {
        switch self {
        case .random, .katran, .awsNetworkLoadBalancer: 16
        case .quicLB(let configuration): 1 + configuration.plaintextLength + 1
        }
    }

    /// Where the loop tag is in each ID.
    package var steeringOffset: Int {
        switch self {
        case .random, .awsNetworkLoadBalancer: 0
        case .quicLB(let configuration): 1 + configuration.plaintextLength
        case .katran(let version, _): version.serverIDEnd
        }
    }

    package func validate() throws(QUICError) {
        switch self {
        case .random: break
        case .quicLB(let configuration): try configuration.validate(trailing: 1)
        case .katran(let version, let serverID):
            guard serverID > 0, UInt64(serverID) <= version.maxServerID else {
                throw .configuration("a Katran \(version) server ID is 1 to \(version.maxServerID), not \(serverID) (Katran ignores 0)")
            }
        case .awsNetworkLoadBalancer:
            throw .configuration(
                "unsupported: AWS Network Load Balancer connection IDs (AWS documents the 8-byte server ID but not where it goes in the connection ID); use .quicLB or .katran")
        }
    }
}

/// Katran's connection-ID versions: the server ID's width and place.
package enum KatranConnectionIDVersion: Int, Sendable, Hashable, CustomStringConvertible {
    /// 16-bit server ID in bits 2 to 17.
    case v1 = 1
    /// 24-bit server ID in bytes 1 to 3.
    case v2 = 2
    /// 32-bit server ID in bytes 1 to 4.
    case v3 = 3

    package var maxServerID: UInt64 {
        switch self {
        case .v1: 0xffff
        case .v2: 0xff_ffff
        case .v3: 0xffff_ffff
        }
    }

    /// The first byte after the server ID.
    var serverIDEnd: Int {
        switch self {
        case .v1: 3
        case .v2: 4
        case .v3: 5
        }
    }

    package var description: String { "version \(rawValue)" }
}
