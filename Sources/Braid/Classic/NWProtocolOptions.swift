/// The options of one protocol in a classic-API stack (`NWParameters.defaultProtocolStack`):
/// `NWProtocolTCP.Options`, `NWProtocolTLS.Options`, `NWProtocolUDP.Options`,
/// `NWProtocolIP.Options`, `NWProtocolQUIC.Options`. Each turns itself into the new API's
/// stack value when a connection starts, so both dialects run the same stacks.
///
/// `@unchecked Sendable`: a class Swift cannot check, whose subclasses keep every value
/// behind a lock.
public class NWProtocolOptions: @unchecked Sendable {
    init() {}

    /// An independent copy (`NWParameters.copy()`).
    func copy() -> NWProtocolOptions { self }

    /// The stack of this protocol as the transport, over `ip`.
    func transportStack(ip: IP, parameters: NWParameters) throws -> any StackBinding {
        throw NetworkError.invalidConfiguration("\(type(of: self)) is not a transport protocol (use TCP, UDP or QUIC options)")
    }

    /// The stack of this protocol as an application protocol over `lower`.
    func stack(over lower: any StackBinding) throws -> any StackBinding {
        throw NetworkError.invalidConfiguration("\(type(of: self)) is not an application protocol")
    }

    /// `stack(over:)` for a protocol that also reads the connection's `parameters` (TLS:
    /// `allowFastOpen` allows early data).
    func stack(over lower: any StackBinding, parameters: NWParameters) throws -> any StackBinding {
        try stack(over: lower)
    }
}

/// Throws `unsupported` naming `option` when `isSet`: an option Linux or Braid cannot apply is
/// refused when the connection starts rather than dropped.
func requireUnset(_ isSet: Bool, _ option: String) throws {
    if isSet { throw NetworkError.unsupported("\(option) on Linux") }
}
