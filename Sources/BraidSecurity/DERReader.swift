/// Just enough DER to find a SubjectPublicKeyInfo's key bits (RFC 5280 §4.1): SEQUENCE {
/// AlgorithmIdentifier, BIT STRING }. GnuTLS exports the whole structure but not these bits
/// for every key type, and Apple's external key form is exactly them.
enum DERReader {
    /// The BIT STRING's content after its unused-bits byte; nil if `spki` is not that shape.
    static func subjectPublicKeyBits(of spki: [UInt8]) -> [UInt8]? {
        guard let outer = element(in: spki[...], tag: 0x30) else { return nil }
        var rest = outer.content
        guard let algorithm = element(in: rest, tag: 0x30) else { return nil }
        rest = rest[algorithm.end...]
        guard let bits = element(in: rest, tag: 0x03), let unused = bits.content.first, unused == 0 else { return nil }
        return Array(bits.content.dropFirst())
    }

    /// The element of `tag` at the start of `bytes`: its content and where it ends.
    private static func element(in bytes: ArraySlice<UInt8>, tag: UInt8) -> (content: ArraySlice<UInt8>, end: Int)? {
        var index = bytes.startIndex
        guard index < bytes.endIndex, bytes[index] == tag else { return nil }
        index += 1
        guard index < bytes.endIndex else { return nil }
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            // Lengths of up to four bytes: far beyond any key.
            guard (1...4).contains(count), index + count <= bytes.endIndex else { return nil }
            length = bytes[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
            index += count
        }
        guard length <= bytes.endIndex - index else { return nil }
        return (bytes[index..<index + length], index + length)
    }
}
