import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import Dispatch
import Foundation

/// A browser in Network.framework's classic API: finds the DNS-SD services of a type on the
/// local network and reports the set of them, and what changed, on its queue.
///
/// ```swift
/// let browser = NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp)
/// browser.browseResultsChangedHandler = { results, changes in
///     for result in results { print(result.endpoint) }
/// }
/// browser.stateUpdateHandler = { state in print(state) }
/// browser.start(queue: .main)
/// ```
///
/// Braid browses with its own multicast DNS querier (RFC 6762, in the process; see the
/// "Local-network discovery" article), in the `local.` domain only. Each result's endpoint is a `.service`
/// endpoint a connection resolves by itself.
public final class NWBrowser: Sendable, CustomDebugStringConvertible {
    /// What to browse for.
    public enum Descriptor: Sendable, Hashable {
        /// Services of `type` ("_game._tcp") in `domain` (nil: "local.").
        case bonjour(type: String, domain: String?)
        /// The same, with each result's TXT record in its metadata.
        case bonjourWithTXTRecord(type: String, domain: String?)

        var type: String {
            switch self {
            case .bonjour(let type, _), .bonjourWithTXTRecord(let type, _): type
            }
        }

        var domain: String? {
            switch self {
            case .bonjour(_, let domain), .bonjourWithTXTRecord(_, let domain): domain
            }
        }
    }

    /// The browser's states.
    public enum State: Sendable, Hashable {
        case setup
        case ready
        case failed(NWError)
        case cancelled
        case waiting(NWError)
    }

    /// The descriptor the browser was made with.
    public let descriptor: Descriptor
    /// The parameters the browser was made with.
    public let parameters: NWParameters

    private struct Shared {
        var resultsChanged: (@Sendable (Set<Result>, Set<Result.Change>) -> Void)?
        var stateUpdate: (@Sendable (State) -> Void)?
        var queue: DispatchQueue?
        var state: State = .setup
        var results: Set<Result> = []
        var browsing: (discovery: any DiscoveryBackend, id: UInt64)?
        var cancelled = false
    }
    private let shared = Locked(Shared())

    /// A browser for `descriptor`'s services. The parameters' interface requirements and
    /// prohibitions filter the results.
    public init(for descriptor: Descriptor, using parameters: NWParameters) {
        self.descriptor = descriptor
        self.parameters = parameters
    }

    // A browser dropped without `cancel()` stops browsing too.
    deinit {
        if let (discovery, id) = shared.withLock({ $0.browsing }) { discovery.stopBrowsing(id) }
    }

    /// Where the browser browses, while it does.
    var browsing: (discovery: any DiscoveryBackend, id: UInt64)? { shared.withLock { $0.browsing } }

    public var debugDescription: String { "NWBrowser for \(descriptor): \(state)" }

    /// Called on the browser's queue with the whole set of results and what changed, each
    /// time the set changes.
    public var browseResultsChangedHandler: (@Sendable (_ newResults: Set<Result>, _ changes: Set<Result.Change>) -> Void)? {
        get { shared.withLock { $0.resultsChanged } }
        set { shared.withLock { $0.resultsChanged = newValue } }
    }

    /// Called on the browser's queue with every state change.
    public var stateUpdateHandler: (@Sendable (_ newState: State) -> Void)? {
        get { shared.withLock { $0.stateUpdate } }
        set { shared.withLock { $0.stateUpdate = newValue } }
    }

    /// The results now.
    public var browseResults: Set<Result> { shared.withLock { $0.results } }

    /// The state now.
    public var state: State { shared.withLock { $0.state } }

    /// The queue handlers run on, once started.
    public var queue: DispatchQueue? { shared.withLock { $0.queue } }

    /// Starts browsing; handlers run on `queue`. Calls after the first do nothing.
    public func start(queue: DispatchQueue) {
        let start = shared.withLock { shared -> Bool in
            guard shared.queue == nil, !shared.cancelled else { return false }
            shared.queue = queue
            return true
        }
        guard start else { return }
        let type: DNSName
        let discovery: any DiscoveryBackend
        do {
            type = try DiscoveryRuntime.serviceType(descriptor.type, domain: descriptor.domain)
            discovery = try DiscoveryRuntime.discovery()
        } catch {
            update(.failed(NWError(NetworkError(error))))
            return
        }
        let includeTXT = if case .bonjourWithTXTRecord = descriptor { true } else { false }
        let filter = BrowseFilter(parameters: parameters)
        let id = discovery.browse(type: type, interfaces: filter.interfaces) { [weak self] results in
            self?.deliver(Set(results.filter(filter.allows).map { Result($0, includeTXT: includeTXT) }))
        }
        let cancelled = shared.withLock { shared -> Bool in
            shared.browsing = (discovery, id)
            return shared.cancelled
        }
        if cancelled { discovery.stopBrowsing(id) }
        update(.ready)
    }

    /// Stops browsing; the state becomes `cancelled`.
    public func cancel() {
        let browsing = shared.withLock { shared -> (any DiscoveryBackend, UInt64)? in
            shared.cancelled = true
            defer { shared.browsing = nil }
            return shared.browsing
        }
        if let (discovery, id) = browsing { discovery.stopBrowsing(id) }
        update(.cancelled)
    }

    private func deliver(_ results: Set<Result>) {
        let delivery = shared.withLock { shared -> (DispatchQueue?, (@Sendable (Set<Result>, Set<Result.Change>) -> Void)?, Set<Result.Change>)? in
            guard !shared.cancelled, results != shared.results else { return nil }
            let changes = Result.Change.between(shared.results, results)
            shared.results = results
            return (shared.queue, shared.resultsChanged, changes)
        }
        guard let (queue, handler, changes) = delivery, let handler else { return }
        (queue ?? .global()).async { handler(results, changes) }
    }

    private func update(_ state: State) {
        let delivery = shared.withLock { shared -> (DispatchQueue?, (@Sendable (State) -> Void)?)? in
            guard shared.state != state, shared.state != .cancelled else { return nil }
            if case .failed = shared.state { return nil }
            shared.state = state
            return (shared.queue, shared.stateUpdate)
        }
        guard let (queue, handler) = delivery, let handler else { return }
        (queue ?? .global()).async { handler(state) }
    }
}
