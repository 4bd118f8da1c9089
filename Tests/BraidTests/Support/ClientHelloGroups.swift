/// What a TLS ClientHello offers for the key exchange (RFC 8446 §4.2.7, §4.2.8): the groups it
/// sent key shares for and the groups it supports, read from the handshake message.
struct ClientHelloGroups: Equatable {
    static let x25519: UInt16 = 0x001D
    static let secp256r1: UInt16 = 0x0017

    /// Groups with a key share, in the order sent.
    var keyShares: [UInt16] = []
    /// `supported_groups`, in the client's preference order.
    var supported: [UInt16] = []

    /// From the first record of a client's first flight (a plaintext handshake record).
    init?(firstRecord bytes: [UInt8]) {
        var reader = Reader(bytes)
        guard reader.byte() == 22, reader.bytes(2) != nil, let length = reader.uint16(), let body = reader.bytes(Int(length)) else { return nil }
        self.init(handshakeMessage: body)
    }

    /// From a ClientHello handshake message, with its 4-byte header (type 1, length).
    init?(handshakeMessage bytes: [UInt8]) {
        var reader = Reader(bytes)
        guard reader.byte() == 1, let length = reader.uint24(), let hello = reader.bytes(length) else { return nil }
        reader = Reader(hello)
        // legacy_version, random, legacy_session_id, cipher_suites, legacy_compression_methods
        guard reader.bytes(2 + 32) != nil, let session = reader.byte(), reader.bytes(Int(session)) != nil,
            let suites = reader.uint16(), reader.bytes(Int(suites)) != nil,
            let methods = reader.byte(), reader.bytes(Int(methods)) != nil,
            let extensionsLength = reader.uint16(), let extensions = reader.bytes(Int(extensionsLength)), reader.isAtEnd
        else { return nil }
        reader = Reader(extensions)
        while !reader.isAtEnd {
            guard let type = reader.uint16(), let size = reader.uint16(), let data = reader.bytes(Int(size)) else { return nil }
            var field = Reader(data)
            switch type {
            case 10:  // supported_groups: a list of 2-byte groups
                guard let listLength = field.uint16(), listLength % 2 == 0 else { return nil }
                for _ in 0..<listLength / 2 {
                    guard let group = field.uint16() else { return nil }
                    supported.append(group)
                }
            case 51:  // key_share: entries of group and length-prefixed key
                guard let listLength = field.uint16(), var entries = field.bytes(Int(listLength)).map(Reader.init) else { return nil }
                while !entries.isAtEnd {
                    guard let group = entries.uint16(), let keyLength = entries.uint16(), entries.bytes(Int(keyLength)) != nil else { return nil }
                    keyShares.append(group)
                }
            default:
                break
            }
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var isAtEnd: Bool { index == bytes.count }
        mutating func bytes(_ count: Int) -> [UInt8]? {
            guard count >= 0, bytes.count - index >= count else { return nil }
            defer { index += count }
            return Array(bytes[index..<index + count])
        }
        mutating func byte() -> UInt8? { bytes(1)?[0] }
        mutating func uint16() -> UInt16? { bytes(2).map { UInt16($0[0]) << 8 | UInt16($0[1]) } }
        mutating func uint24() -> Int? { bytes(3).map { Int($0[0]) << 16 | Int($0[1]) << 8 | Int($0[2]) } }
    }
}
