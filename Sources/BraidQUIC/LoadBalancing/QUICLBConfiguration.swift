/// One QUIC-LB configuration (draft-ietf-quic-load-balancers): what a QUIC-LB load balancer
/// and its servers agree on to put a server ID into every connection ID the server issues.
///
/// A connection ID is a first octet (3 config-rotation bits, then the length of the rest or 5
/// random bits), then the server ID and a nonce: in clear without a key, encrypted with AES-128
/// with one (a single block when server ID and nonce are 16 bytes, a four-round Feistel network
/// otherwise).
package struct QUICLBConfiguration: Sendable, Hashable {
    /// The config rotation codepoint, 0 to 6 (7 marks IDs no balancer can route).
    package var configRotation: UInt8
    /// This server's ID, 1 to 15 bytes.
    package var serverID: [UInt8]
    /// Nonce bytes after the server ID, at least 4.
    package var nonceLength: Int
    /// The 16-byte AES-128 key; nil sends the server ID in clear.
    package var key: [UInt8]?
    /// The first octet's low 5 bits carry the length of the rest of the ID (else they are random).
    package var encodesLength: Bool

    package init(configRotation: UInt8, serverID: [UInt8], nonceLength: Int, key: [UInt8]? = nil, encodesLength: Bool = true) {
        self.configRotation = configRotation
        self.serverID = serverID
        self.nonceLength = nonceLength
        self.key = key
        self.encodesLength = encodesLength
    }

    /// Server ID and nonce: the block that is encrypted.
    package var plaintextLength: Int { serverID.count + nonceLength }

    /// Checks the limits of the draft; `trailing` bytes follow the QUIC-LB part in each ID.
    package func validate(trailing: Int = 0) throws(QUICError) {
        guard configRotation <= 6 else {
            throw .configuration("QUIC-LB config rotation must be 0 to 6 (7 is reserved for unroutable IDs)")
        }
        guard (1...15).contains(serverID.count) else {
            throw .configuration("a QUIC-LB server ID has 1 to 15 bytes, not \(serverID.count)")
        }
        guard nonceLength >= 4 else { throw .configuration("a QUIC-LB nonce has at least 4 bytes, not \(nonceLength)") }
        guard 1 + plaintextLength + trailing <= 20 else {
            throw .configuration(
                "QUIC-LB server ID (\(serverID.count)) and nonce (\(nonceLength)) leave no room in a 20-byte connection ID"
                    + (trailing > 0 ? " with the \(trailing)-byte loop tag; keep them at \(19 - trailing) bytes together" : ""))
        }
        if let key, key.count != 16 { throw .configuration("a QUIC-LB key has 16 bytes, not \(key.count)") }
    }
}

/// Encodes and decodes the connection IDs of one `QUICLBConfiguration`. Holds the AES key
/// schedule, so one instance belongs to one thread.
package final class QUICLBCodec {
    package let configuration: QUICLBConfiguration
    private let cipher: AES128Block?

    package init(_ configuration: QUICLBConfiguration) throws(QUICError) {
        try configuration.validate()
        self.configuration = configuration
        cipher = try configuration.key.map { key throws(QUICError) in try AES128Block(key: key) }
    }

    /// The connection ID for `nonce` (exactly `nonceLength` bytes), followed by `trailing`
    /// bytes the balancer ignores (counted in the first octet's length).
    package func encode(nonce: [UInt8], trailing: [UInt8] = []) -> [UInt8] {
        precondition(nonce.count == configuration.nonceLength, "nonce length differs from the configuration")
        let plaintext = configuration.serverID + nonce
        var firstOctet = configuration.configRotation << 5
        if configuration.encodesLength {
            firstOctet |= UInt8(truncatingIfNeeded: plaintext.count + trailing.count) & 0x1f
        } else {
            var random: [UInt8] = [0]
            fillRandom(&random)
            firstOctet |= random[0] & 0x1f
        }
        return [firstOctet] + encrypt(plaintext) + trailing
    }

    /// The server ID in `cid`, or nil if it is too short or not of this configuration's
    /// rotation codepoint.
    package func serverID(in cid: [UInt8]) -> [UInt8]? {
        guard cid.count >= 1 + configuration.plaintextLength, cid[0] >> 5 == configuration.configRotation else { return nil }
        let plaintext = decrypt(Array(cid[1...configuration.plaintextLength]))
        return Array(plaintext.prefix(configuration.serverID.count))
    }

    /// The nonce in `cid` (decrypted), or nil if it is too short or not of this configuration.
    package func nonce(in cid: [UInt8]) -> [UInt8]? {
        guard cid.count >= 1 + configuration.plaintextLength, cid[0] >> 5 == configuration.configRotation else { return nil }
        return Array(decrypt(Array(cid[1...configuration.plaintextLength])).dropFirst(configuration.serverID.count))
    }

    private func encrypt(_ plaintext: [UInt8]) -> [UInt8] {
        guard let cipher else { return plaintext }
        if plaintext.count == 16 { return cipher.encrypt(plaintext) }
        var (left, right) = split(plaintext)
        right = xor(right, round(cipher, 1, left), clearing: .first)
        left = xor(left, round(cipher, 2, right), clearing: .last)
        right = xor(right, round(cipher, 3, left), clearing: .first)
        left = xor(left, round(cipher, 4, right), clearing: .last)
        return join(left, right, length: plaintext.count)
    }

    private func decrypt(_ ciphertext: [UInt8]) -> [UInt8] {
        guard let cipher else { return ciphertext }
        if ciphertext.count == 16 { return cipher.decrypt(ciphertext) }
        var (left, right) = split(ciphertext)
        left = xor(left, round(cipher, 4, right), clearing: .last)
        right = xor(right, round(cipher, 3, left), clearing: .first)
        left = xor(left, round(cipher, 2, right), clearing: .last)
        right = xor(right, round(cipher, 1, left), clearing: .first)
        return join(left, right, length: ciphertext.count)
    }

    // MARK: Four-pass helpers

    private var isOdd: Bool { configuration.plaintextLength % 2 == 1 }
    private var halfLength: Int { (configuration.plaintextLength + 1) / 2 }

    private enum Nibble { case first, last }

    /// The two halves; for an odd length the middle byte's high nibble goes left, its low right.
    private func split(_ bytes: [UInt8]) -> ([UInt8], [UInt8]) {
        var left = Array(bytes.prefix(halfLength))
        var right = Array(bytes.suffix(halfLength))
        if isOdd {
            left[halfLength - 1] &= 0xf0
            right[0] &= 0x0f
        }
        return (left, right)
    }

    private func join(_ left: [UInt8], _ right: [UInt8], length: Int) -> [UInt8] {
        guard isOdd else { return left + right }
        return left.dropLast() + [left[halfLength - 1] | right[0]] + right.dropFirst()
    }

    /// AES of `half` expanded to a block: the half, zeros, then the plaintext length and the pass.
    private func round(_ cipher: AES128Block, _ pass: UInt8, _ half: [UInt8]) -> [UInt8] {
        var block = [UInt8](repeating: 0, count: 16)
        block.replaceSubrange(0..<half.count, with: half)
        block[14] = UInt8(configuration.plaintextLength)
        block[15] = pass
        return Array(cipher.encrypt(block).prefix(halfLength))
    }

    private func xor(_ half: [UInt8], _ mask: [UInt8], clearing nibble: Nibble) -> [UInt8] {
        var result = zip(half, mask).map { $0 ^ $1 }
        if isOdd {
            switch nibble {
            case .first: result[0] &= 0x0f
            case .last: result[halfLength - 1] &= 0xf0
            }
        }
        return result
    }
}
