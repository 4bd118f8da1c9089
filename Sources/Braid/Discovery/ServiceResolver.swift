import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import Foundation

/// Resolves a `.service` endpoint over multicast DNS: browses its type until the instance is
/// heard with its SRV record and its host's addresses, then stops.
enum ServiceResolver {
    /// How long a resolution waits for the instance before failing with `dnsNameNotFound`.
    static let timeout = Duration.seconds(10)

    static func addresses(for endpoint: NWEndpoint) async throws -> [SocketAddress] {
        guard case .service(let name, let type, let domain, let interface) = endpoint else { return [] }
        let typeName = try DiscoveryRuntime.serviceType(type, domain: domain)
        let discovery = try DiscoveryRuntime.discovery()
        let wanted = Array(name.utf8)
        let state = Locked<(continuation: CheckedContinuation<[SocketAddress], any Error>?, id: UInt64?, finished: Bool)>((nil, nil, false))
        let finish: @Sendable (Result<[SocketAddress], any Error>) -> Void = { result in
            let (continuation, id) = state.withLock { state in
                defer { state.continuation = nil; state.finished = true }
                return (state.continuation, state.id)
            }
            if let id { discovery.stopBrowsing(id) }
            continuation?.resume(with: result)
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // A task cancelled before this point ran its handler already, with no continuation
                // to resume: end at once instead of waiting out the timeout.
                let cancelled = state.withLock { state in
                    if state.finished { return true }
                    state.continuation = continuation
                    return false
                }
                if cancelled { continuation.resume(throwing: NetworkError.cancelled); return }
                let id = discovery.browse(type: typeName, interfaces: nil) { results in
                    for result in results where DNSName.labelsMatch(result.instance, wanted)
                        && (interface == nil || Int(result.interface) == interface!.index) {
                        let addresses = DiscoveryRuntime.addresses(of: result)
                        if !addresses.isEmpty { finish(.success(addresses)) }
                    }
                }
                // A result may have finished the resolution before the ID was stored.
                if state.withLock({ state in state.id = id; return state.finished }) { discovery.stopBrowsing(id) }
                Task {
                    try? await Task.sleep(for: timeout)
                    finish(.failure(NetworkError.dnsNameNotFound(host: "\(endpoint) (no answer over multicast DNS within \(timeout))")))
                }
            }
        } onCancel: {
            finish(.failure(NetworkError.cancelled))
        }
    }
}
