/// What a client remembers to resume a TLS session with a server later, and to send 0-RTT data.
///
/// Store tickets per server name; `serialized()` / `init(serialized:)` give a stable byte form for
/// a file-backed cache. Under TLS 1.3, use each ticket once (reuse lets observers link connections).
public struct TLSSessionTicket: Sendable, Hashable {
    /// The server name the ticket was issued for; it resumes only a connection to this name.
    public var serverName: String
    /// The ALPN negotiated when the ticket was issued (nil: none).
    public var alpn: String?
    /// Most 0-RTT bytes the server accepts with this ticket (0: no early data).
    public var maxEarlyDataSize: Int
    /// GnuTLS's session data.
    var sessionData: [UInt8]

    private static let formatVersion: UInt8 = 1

    init(serverName: String, alpn: String?, maxEarlyDataSize: Int, sessionData: [UInt8]) {
        self.serverName = serverName
        self.alpn = alpn
        self.maxEarlyDataSize = maxEarlyDataSize
        self.sessionData = sessionData
    }

    /// A compact, versioned binary form.
    public func serialized() -> [UInt8] {
        var writer = ByteWriter()
        writer.writeByte(Self.formatVersion)
        writer.writeLengthPrefixed(Array(serverName.utf8))
        writer.writeByte(alpn == nil ? 0 : 1)
        writer.writeLengthPrefixed(Array((alpn ?? "").utf8))
        writer.writeUInt32(UInt32(clamping: maxEarlyDataSize))
        writer.writeLengthPrefixed(sessionData)
        return writer.bytes
    }

    /// Parses `serialized()` output; nil for anything malformed (a cache file is untrusted input).
    public init?(serialized bytes: [UInt8]) {
        var reader = ByteReader(bytes)
        guard reader.readByte() == Self.formatVersion,
            let name = reader.readLengthPrefixed(),
            let hasALPN = reader.readByte(), hasALPN <= 1,
            let alpn = reader.readLengthPrefixed(),
            let maxEarlyData = reader.readUInt32(),
            let session = reader.readLengthPrefixed(),
            reader.isAtEnd, !session.isEmpty
        else { return nil }
        serverName = String(decoding: name, as: UTF8.self)
        self.alpn = hasALPN == 1 ? String(decoding: alpn, as: UTF8.self) : nil
        maxEarlyDataSize = Int(maxEarlyData)
        sessionData = session
    }
}
