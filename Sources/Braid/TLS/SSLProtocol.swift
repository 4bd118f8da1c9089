/// TLS versions in the older terms of Apple's `SSLProtocol`, which deprecated functions such as
/// `sec_protocol_options_set_tls_min_version` take. Linux negotiates TLS 1.2 and 1.3 only.
public enum SSLProtocol: Int32, Sendable {
    case sslProtocolUnknown = 0
    case tlsProtocol1 = 4
    case tlsProtocol11 = 7
    case tlsProtocol12 = 8
    case dtlsProtocol1 = 9
    case tlsProtocol13 = 10
    case dtlsProtocol12 = 11
    case tlsProtocolMaxSupported = 999
}
