import BraidCore
import BraidDiscovery
import BraidDiscoveryIO

/// Finds services on the local network, in Network.framework's new API: `run` gets the list of
/// services each time it changes, until the handler returns `.finish(value)` or throws.
///
/// ```swift
/// let browser = NetworkBrowser(for: .bonjour(type: "_game._tcp", domain: nil))
/// let endpoint = try await browser.run { services in
///     services.isEmpty ? .continue : .finish(services[0].endpoint)
/// }
/// ```
///
/// Braid browses with its own multicast DNS querier in the process (see the "Local-network
/// discovery" article), in the `local.` domain. The parameters' interface rules (a required interface or
/// type, prohibited ones) filter the results.
public final class NetworkBrowser<Provider: BrowserProvider>: Sendable {
    /// What `run`'s handler returns: browse on, or stop and return a value.
    public enum RunResult<Return: Sendable>: Sendable {
        case `continue`
        case finish(Return)
    }

    let provider: Provider
    let parameters: NWParameters?

    /// A browser for `provider`'s services.
    public init(for provider: Provider, using parameters: NWParameters? = nil) {
        self.provider = provider
        self.parameters = parameters
    }

    /// Browses until the handler returns `.finish(value)`, then returns the value. The handler
    /// gets the whole list each time it changes (never concurrently with itself). Throws what the
    /// handler throws, or a `NetworkError` if browsing cannot start; cancelling the task stops
    /// browsing and throws `CancellationError`.
    public func run<Return: Sendable>(
        _ handler: @escaping @Sendable ([Provider.Endpoint]) async throws -> RunResult<Return>
    ) async throws -> Return {
        for try await endpoints in updates() {
            if case .finish(let value) = try await handler(endpoints) { return value }
        }
        throw CancellationError()
    }

    /// Browses until the task is cancelled (then throws `CancellationError`) or the handler
    /// throws, calling it with the whole list each time it changes.
    public func run(_ handler: @escaping @Sendable ([Provider.Endpoint]) async throws -> Void) async throws {
        for try await endpoints in updates() { try await handler(endpoints) }
        throw CancellationError()
    }

    /// The lists of services as they change, starting with the first service found (never an
    /// empty list before it). Browsing stops when iteration ends.
    public func updates() -> AsyncThrowingStream<[Provider.Endpoint], any Error> {
        let request = provider.browseRequest
        let filter = BrowseFilter(parameters: parameters)
        return AsyncThrowingStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let discovery: any DiscoveryBackend
            let type: DNSName
            do {
                type = try DiscoveryRuntime.serviceType(request.type, domain: request.domain)
                discovery = try DiscoveryRuntime.discovery()
            } catch {
                continuation.finish(throwing: NetworkError(error))
                return
            }
            // No empty list before the first result: a handler may take the first element of
            // any list it gets.
            let heardAny = Locked(false)
            let id = discovery.browse(type: type, interfaces: filter.interfaces) { results in
                let endpoints = results.filter(filter.allows).map {
                    Provider.endpoint(for: NWBrowser.Result($0, includeTXT: request.includeTXTRecord))
                }
                guard heardAny.withLock({ heard in
                    heard = heard || !endpoints.isEmpty
                    return heard
                }) else { return }
                continuation.yield(endpoints)
            }
            continuation.onTermination = { _ in discovery.stopBrowsing(id) }
        }
    }
}
