import BraidCore
import BraidTLS

/// Client contexts are costly (parsing the trust store, loading credentials): one per distinct
/// configuration, shared by every connection that uses it. TLS's and DTLS's each keep one.
final class TLSClientContextCache<Context: Sendable>: Sendable {
    private let contexts = Locked<[TLSClientConfiguration: Context]>([:])
    private let make: @Sendable (TLSClientConfiguration) throws -> Context

    init(making make: @escaping @Sendable (TLSClientConfiguration) throws -> Context) { self.make = make }

    func context(for configuration: TLSClientConfiguration) throws -> Context {
        if let existing = contexts.withLock({ $0[configuration] }) { return existing }
        let made = try make(configuration)
        contexts.withLock { $0[configuration] = made }
        return made
    }
}
