/// A protocol a connection or listener can run, the top of a stack built with
/// `@ProtocolStackBuilder` (`QUIC`, `TLS`, `TCP`, `UDP`).
public protocol NetworkProtocol: Sendable {}

/// Builds a protocol stack from its top protocol, as in `NetworkConnection(to:) { QUIC(alpn:) }`
/// or `QUIC(alpn:) { UDP { IP().version(.v6) } }`.
@resultBuilder
public enum ProtocolStackBuilder {
    /// A stack is named by its top protocol, which carries the layers below it.
    public static func buildBlock<Top: NetworkProtocol>(_ top: Top) -> Top { top }
}

/// Builds the IP layer under `UDP` or `TCP`.
@resultBuilder
public enum IPStackBuilder {
    /// The IP options, as written.
    public static func buildBlock(_ ip: IP) -> IP { ip }
}
