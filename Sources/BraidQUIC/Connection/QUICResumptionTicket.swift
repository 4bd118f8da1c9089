import BraidTLS
import CBraid

/// What a client remembers about a server to resume with it later and send 0-RTT data:
/// the TLS session ticket, the server's transport limits (0-RTT must respect them before the
/// handshake confirms them), and the address-validation token from NEW_TOKEN if one came.
///
/// Store tickets per server name and ALPN; `serialized()` / `init(serialized:)` give a stable
/// byte form for a file-backed cache.
package struct QUICResumptionTicket: Sendable, Hashable {
    package var serverName: String
    package var alpn: String
    var tlsSessionData: [UInt8]
    var transportParameters: RememberedTransportParameters
    /// Token from the server's NEW_TOKEN frame: lets the next Initial skip address validation.
    var token: [UInt8]
    /// When the TLS ticket arrived and how long the server keeps it valid.
    package var validity: TLSTicketValidity

    /// 2 added `validity`; a version 1 ticket is not read (its age is unknown).
    private static let formatVersion: UInt8 = 2

    /// False for a ticket too old (or too near its end) to offer at `now` (wall-clock
    /// milliseconds): a client then does a full handshake instead, without 0-RTT.
    package func isUsable(at now: UInt64 = TLSTicketValidity.wallClock()) -> Bool {
        validity.isUsable(at: now)
    }

    /// A compact, versioned binary form.
    package func serialized() -> [UInt8] {
        var writer = ByteWriter()
        writer.writeByte(Self.formatVersion)
        writer.writeLengthPrefixed(Array(serverName.utf8))
        writer.writeLengthPrefixed(Array(alpn.utf8))
        writer.writeLengthPrefixed(tlsSessionData)
        writer.writeLengthPrefixed(token)
        for value in transportParameters.fields { writer.writeUInt64(value) }
        writer.writeUInt64(validity.arrival)
        writer.writeUInt32(validity.lifetime)
        return writer.bytes
    }

    /// Parses `serialized()` output; nil for anything malformed (a cache file is untrusted input).
    package init?(serialized bytes: [UInt8]) {
        var reader = ByteReader(bytes)
        guard reader.readByte() == Self.formatVersion,
            let name = reader.readLengthPrefixed(),
            let alpn = reader.readLengthPrefixed(),
            let session = reader.readLengthPrefixed(),
            let token = reader.readLengthPrefixed()
        else { return nil }
        var fields: [UInt64] = []
        for _ in 0..<RememberedTransportParameters.fieldCount {
            guard let value = reader.readUInt64() else { return nil }
            fields.append(value)
        }
        guard let arrival = reader.readUInt64(), let lifetime = reader.readUInt32(), reader.isAtEnd, !session.isEmpty
        else { return nil }
        self.validity = TLSTicketValidity(arrival: arrival, lifetime: lifetime)
        self.serverName = String(decoding: name, as: UTF8.self)
        self.alpn = String(decoding: alpn, as: UTF8.self)
        self.tlsSessionData = session
        self.token = token
        self.transportParameters = RememberedTransportParameters(fields: fields)
    }

    init(
        serverName: String, alpn: String, tlsSessionData: [UInt8], transportParameters: RememberedTransportParameters, token: [UInt8],
        validity: TLSTicketValidity
    ) {
        self.validity = validity
        self.serverName = serverName
        self.alpn = alpn
        self.tlsSessionData = tlsSessionData
        self.transportParameters = transportParameters
        self.token = token
    }
}

/// The server transport parameters a client must remember for 0-RTT (RFC 9000 §7.4.1).
struct RememberedTransportParameters: Sendable, Hashable {
    static let fieldCount = 8
    var fields: [UInt64]

    init(fields: [UInt64]) {
        precondition(fields.count == Self.fieldCount)
        self.fields = fields
    }

    init(_ params: ngtcp2_transport_params) {
        fields = [
            params.initial_max_streams_bidi, params.initial_max_streams_uni,
            params.initial_max_stream_data_bidi_local, params.initial_max_stream_data_bidi_remote,
            params.initial_max_stream_data_uni, params.initial_max_data,
            params.active_connection_id_limit, params.max_datagram_frame_size,
        ]
    }

    /// Writes the remembered fields over ngtcp2's defaults.
    func apply(to params: inout ngtcp2_transport_params) {
        params.initial_max_streams_bidi = fields[0]
        params.initial_max_streams_uni = fields[1]
        params.initial_max_stream_data_bidi_local = fields[2]
        params.initial_max_stream_data_bidi_remote = fields[3]
        params.initial_max_stream_data_uni = fields[4]
        params.initial_max_data = fields[5]
        params.active_connection_id_limit = fields[6]
        params.max_datagram_frame_size = fields[7]
    }
}

/// Reads big-endian fields from untrusted bytes without ever trapping.
