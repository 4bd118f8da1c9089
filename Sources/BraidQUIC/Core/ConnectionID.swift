import CBraid

/// A QUIC connection ID (0 to 20 bytes), stored inline so routing needs no allocation.
package struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    private var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
    package private(set) var count: Int

    init(_ cid: ngtcp2_cid) {
        var cid = cid
        self.init(pointer: &cid.data.0, count: cid.datalen)
    }

    init(pointer: UnsafePointer<UInt8>, count: Int) {
        precondition(count <= 20)
        self.count = count
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: count)) }
    }

    package init(bytes: [UInt8]) {
        self.init(pointer: bytes, count: min(bytes.count, 20))
    }

    /// A random connection ID of `length` bytes.
    /// A random ID; `tag`, when given, replaces the first byte (it routes the ID to a socket).
    static func random(length: Int, tag: UInt8? = nil) -> ConnectionID {
        var bytes = [UInt8](repeating: 0, count: length)
        fillRandom(&bytes)
        if let tag, length > 0 { bytes[0] = tag }
        return ConnectionID(bytes: bytes)
    }

    package var bytes: [UInt8] { withUnsafeBytes(of: words) { Array($0.prefix(count)) } }

    var ngtcp2: ngtcp2_cid {
        var cid = ngtcp2_cid()
        withUnsafeBytes(of: words) { raw in
            ngtcp2_cid_init(&cid, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
        }
        return cid
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.count == rhs.count && lhs.words == rhs.words
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
    }

    package var description: String { bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined() }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
