import BraidHTTP3
import HTTPTypes

/// swift-http-types values to and from the engine's wire fields. Connection-specific fields
/// (RFC 9114 section 4.2: connection, keep-alive, proxy-connection, transfer-encoding,
/// upgrade) are dropped on sending, since HTTP/3 forbids them.
enum HTTP3FieldMapping {
    private static let connectionSpecific: Set<String> = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]

    static func fields(_ request: HTTPRequest) -> [HTTP3Field] {
        var fields: [HTTP3Field] = []
        fields.reserveCapacity(5 + request.headerFields.count)
        fields.append(HTTP3Field(":method", request.method.rawValue))
        if let scheme = request.scheme { fields.append(HTTP3Field(":scheme", scheme)) }
        if let authority = request.authority { fields.append(HTTP3Field(":authority", authority)) }
        if let path = request.path { fields.append(HTTP3Field(":path", path)) }
        if let protocolName = request.extendedConnectProtocol { fields.append(HTTP3Field(":protocol", protocolName)) }
        append(request.headerFields, to: &fields)
        return fields
    }

    static func fields(_ response: HTTPResponse) -> [HTTP3Field] {
        var fields: [HTTP3Field] = []
        fields.reserveCapacity(1 + response.headerFields.count)
        fields.append(HTTP3Field(":status", String(response.status.code)))
        append(response.headerFields, to: &fields)
        return fields
    }

    private static func append(_ headerFields: HTTPFields, to fields: inout [HTTP3Field]) {
        for field in headerFields where !connectionSpecific.contains(field.name.canonicalName) {
            fields.append(HTTP3Field(name: field.name.canonicalName, value: Array(field.value.utf8)))
        }
    }

    /// The request a server received (nghttp3 checked the pseudo-headers already); nil when a
    /// field cannot be represented (the caller answers 400).
    static func request(_ fields: [HTTP3Field]) -> HTTPRequest? {
        var method: HTTPRequest.Method?
        var scheme: String?, authority: String?, path: String?
        var headerFields = HTTPFields()
        for field in fields {
            switch field.name {
            case ":method": method = HTTPRequest.Method(field.stringValue)
            case ":scheme": scheme = field.stringValue
            case ":authority": authority = field.stringValue
            case ":path": path = field.stringValue
            case ":protocol": continue
            default:
                guard !field.name.hasPrefix(":"), let name = HTTPField.Name(field.name) else { return nil }
                headerFields.append(HTTPField(name: name, lenientValue: field.value))
            }
        }
        guard let method else { return nil }
        return HTTPRequest(method: method, scheme: scheme, authority: authority, path: path, headerFields: headerFields)
    }

    /// The response a client received; nil without a valid `:status`.
    static func response(_ fields: [HTTP3Field]) -> HTTPResponse? {
        guard let status = fields.value(of: ":status").flatMap({ Int($0) }), (100...999).contains(status) else { return nil }
        var headerFields = HTTPFields()
        for field in fields where !field.name.hasPrefix(":") {
            guard let name = HTTPField.Name(field.name) else { return nil }
            headerFields.append(HTTPField(name: name, lenientValue: field.value))
        }
        return HTTPResponse(status: HTTPResponse.Status(code: status), headerFields: headerFields)
    }
}
