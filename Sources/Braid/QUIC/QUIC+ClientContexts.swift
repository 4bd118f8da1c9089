import BraidCore
import BraidQUIC

/// Client TLS contexts are costly (parsing the trust store, loading credentials): one per
/// distinct configuration, shared by every connection that uses it.
enum ClientContexts {
    private static let cache = Locked<[QUICClientConfiguration: QUICClientContext]>([:])

    static func context(for quic: QUIC) throws -> QUICClientContext {
        let configuration = try quic.clientConfiguration()
        if let existing = cache.withLock({ $0[configuration] }) { return existing }
        let made = try QUICClientContext(configuration: configuration)
        cache.withLock { $0[configuration] = made }
        return made
    }
}
