import BraidCore
import BraidDiscovery
import BraidDiscoveryIO

/// What a `NetworkBrowser` browses for: today `Bonjour`, DNS-SD services over multicast DNS.
public protocol BrowserProvider: Sendable {
    /// What the browser reports for each service found.
    associatedtype Endpoint: Sendable
    /// The type and domain as DNS names, and whether results carry TXT records.
    var browseRequest: BrowseRequest { get }
    /// The endpoint for one result.
    static func endpoint(for result: NWBrowser.Result) -> Endpoint
}

/// A provider's request: what `NetworkBrowser` asks multicast DNS for.
public struct BrowseRequest: Sendable, Hashable {
    let type: String
    let domain: String?
    let includeTXTRecord: Bool
}

/// DNS-SD services of one type: the provider of `NetworkBrowser(for: .bonjour(...))`.
///
/// ```swift
/// let browser = NetworkBrowser(for: .bonjour(type: "_game._tcp", domain: nil))
/// ```
public struct Bonjour: BrowserProvider {
    /// One service found: its result (endpoint, TXT record, interfaces).
    public struct Endpoint: Sendable, Hashable {
        /// The service as the classic API reports it.
        public let result: NWBrowser.Result
        /// The `.service(name:type:domain:interface:)` endpoint to connect to.
        public var endpoint: NWEndpoint { result.endpoint }
        /// The service's TXT record (empty unless the provider asked for it).
        public var txtRecord: NWTXTRecord {
            if case .bonjour(let record) = result.metadata { record } else { NWTXTRecord() }
        }
    }

    public let browseRequest: BrowseRequest

    public static func endpoint(for result: NWBrowser.Result) -> Endpoint { Endpoint(result: result) }
}

extension BrowserProvider where Self == Bonjour {
    /// Services of `type` ("_game._tcp") in `domain` (nil: "local."), with their TXT records if
    /// `includeTxtRecord`.
    public static func bonjour(_ type: String, domain: String? = nil, includeTxtRecord: Bool = false) -> Bonjour {
        Bonjour(browseRequest: BrowseRequest(type: type, domain: domain, includeTXTRecord: includeTxtRecord))
    }

    /// Services of `type` in `domain`, with their TXT records.
    public static func bonjour(type: String, domain: String?) -> Bonjour {
        bonjour(type, domain: domain, includeTxtRecord: true)
    }
}

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
/// Braid browses with its own multicast DNS querier in the process (see the README's discovery
/// section), in the `local.` domain. The parameters' interface rules (a required interface or
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
            let discovery: MDNSDiscovery
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
            let id = discovery.browse(type: type) { results in
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
