import Foundation

/// One HTTP/1.1 head of the upgrade (the request or the response, up to its blank line),
/// gathered from pieces with a bound on its size: a peer that never ends its header block
/// fails the handshake at the bound instead of growing memory.
package struct HTTPUpgradeHead: Sendable {
    /// The request line or the status line.
    package let startLine: String
    /// Header fields in order, names lowercased, values trimmed.
    package let fields: [(name: String, value: String)]

    /// The value of `name` (lowercase); repeated fields joined with ", " as RFC 9110 allows.
    package func value(_ name: String) -> String? {
        let values = fields.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether `name`'s comma-separated tokens include `token`, case-insensitively.
    package func hasToken(_ token: String, in name: String) -> Bool {
        guard let value = value(name) else { return false }
        return value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == token }
    }

    /// Parses a head (without its final blank line's CRLF CRLF). Throws for a malformed field.
    package init(parsing bytes: some Collection<UInt8>) throws(WebSocketError) {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        guard !lines.isEmpty, !lines[0].isEmpty else { throw .handshakeFailed("an empty HTTP head") }
        startLine = lines.removeFirst()
        var fields: [(String, String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                !line[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else { throw .handshakeFailed("a malformed HTTP header line") }
            fields.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        self.fields = fields
    }
}

/// Gathers one HTTP head from the bytes that arrive, up to `limit` bytes.
package struct HTTPUpgradeHeadBuffer: Sendable {
    private var bytes: [UInt8] = []
    package let limit: Int

    package init(limit: Int) { self.limit = limit }

    /// Takes bytes from `input` up to the end of the head. Returns how many it took and the
    /// head once complete; the bytes after the head (frames) are the caller's.
    package mutating func take(_ input: UnsafeRawBufferPointer) throws(WebSocketError) -> (taken: Int, head: HTTPUpgradeHead?) {
        var taken = 0
        for byte in input {
            taken += 1
            bytes.append(byte)
            if byte == 0x0A, bytes.count >= 4, bytes[bytes.count - 4 ..< bytes.count].elementsEqual([0x0D, 0x0A, 0x0D, 0x0A]) {
                let head = try HTTPUpgradeHead(parsing: bytes[..<(bytes.count - 4)])
                bytes = []
                return (taken, head)
            }
            if bytes.count >= limit { throw .handshakeTooLarge(limit: limit) }
        }
        return (taken, nil)
    }
}
