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
    /// When a TLS 1.3 ticket arrived and how long the server keeps it valid (nil for TLS 1.2,
    /// whose tickets the server alone judges).
    package var validity: TLSTicketValidity?

    /// 2 added `validity`; a version 1 ticket is not read (its age is unknown).
    private static let formatVersion: UInt8 = 2

    init(serverName: String, alpn: String?, maxEarlyDataSize: Int, sessionData: [UInt8], validity: TLSTicketValidity?) {
        self.serverName = serverName
        self.alpn = alpn
        self.maxEarlyDataSize = maxEarlyDataSize
        self.sessionData = sessionData
        self.validity = validity
    }

    /// False for a TLS 1.3 ticket too old (or too near its end) to offer at `now` (wall-clock
    /// milliseconds): a client then does a full handshake instead.
    package func isUsable(at now: UInt64 = TLSTicketValidity.wallClock()) -> Bool {
        validity?.isUsable(at: now) ?? true
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
        writer.writeByte(validity == nil ? 0 : 1)
        writer.writeUInt64(validity?.arrival ?? 0)
        writer.writeUInt32(validity?.lifetime ?? 0)
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
            let hasValidity = reader.readByte(), hasValidity <= 1,
            let arrival = reader.readUInt64(),
            let lifetime = reader.readUInt32(),
            reader.isAtEnd, !session.isEmpty
        else { return nil }
        serverName = String(decoding: name, as: UTF8.self)
        self.alpn = hasALPN == 1 ? String(decoding: alpn, as: UTF8.self) : nil
        maxEarlyDataSize = Int(maxEarlyData)
        sessionData = session
        validity = hasValidity == 1 ? TLSTicketValidity(arrival: arrival, lifetime: lifetime) : nil
    }
}
