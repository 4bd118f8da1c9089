import BraidDiscovery

extension NWBrowser {
    /// One service a browser found: how to connect to it, the interfaces it was found on, and
    /// its TXT record (for a `.bonjourWithTXTRecord` descriptor).
    ///
    /// ```swift
    /// let browser = NWBrowser(for: .bonjourWithTXTRecord(type: "_game._tcp", domain: nil), using: .tcp)
    /// browser.browseResultsChangedHandler = { results, _ in
    ///     for result in results {
    ///         if case .bonjour(let txt) = result.metadata { print(result.endpoint, txt["players"] ?? "-") }
    ///     }
    /// }
    /// ```
    public struct Result: Hashable, Sendable {
        /// What comes with a result.
        public enum Metadata: Hashable, Sendable {
            /// The service's TXT record.
            case bonjour(NWTXTRecord)
            /// Nothing (the descriptor did not ask for the TXT record).
            case none
        }

        /// A `.service(name:type:domain:interface:)` endpoint.
        public let endpoint: NWEndpoint
        /// The service's TXT record, or `.none`.
        public let metadata: Metadata
        /// The interfaces the service was found on.
        public let interfaces: [NWInterface]

        init(_ result: MDNSBrowseResult, includeTXT: Bool) {
            endpoint = DiscoveryRuntime.endpoint(of: result)
            metadata = includeTXT ? .bonjour(NWTXTRecord(strings: result.txt)) : .none
            interfaces = DiscoveryRuntime.interface(result.interface).map { [$0] } ?? []
        }

        /// How one set of results differs from the one before.
        public enum Change: Hashable, Sendable {
            /// Nothing changed.
            case identical
            /// A service appeared.
            case added(Result)
            /// A service went away.
            case removed(Result)
            /// A service is still there with different metadata or interfaces.
            case changed(old: Result, new: Result, flags: Flags)

            /// What changed in a `changed` result.
            public struct Flags: OptionSet, Hashable, Sendable {
                public let rawValue: UInt64
                public init(rawValue: UInt64) { self.rawValue = rawValue }
                public static let identical = Flags([])
                public static let interfaceAdded = Flags(rawValue: 1 << 0)
                public static let interfaceRemoved = Flags(rawValue: 1 << 1)
                public static let metadataChanged = Flags(rawValue: 1 << 2)
            }

            /// The changes from `old` to `new`, results matched by endpoint.
            static func between(_ old: Set<Result>, _ new: Set<Result>) -> Set<Change> {
                var changes = Set<Change>()
                let oldByEndpoint = Dictionary(old.map { ($0.endpoint, $0) }, uniquingKeysWith: { first, _ in first })
                let newByEndpoint = Dictionary(new.map { ($0.endpoint, $0) }, uniquingKeysWith: { first, _ in first })
                for (endpoint, result) in newByEndpoint {
                    guard let before = oldByEndpoint[endpoint] else {
                        changes.insert(.added(result))
                        continue
                    }
                    guard before != result else { continue }
                    var flags = Flags()
                    if before.metadata != result.metadata { flags.insert(.metadataChanged) }
                    if !Set(result.interfaces).subtracting(before.interfaces).isEmpty { flags.insert(.interfaceAdded) }
                    if !Set(before.interfaces).subtracting(result.interfaces).isEmpty { flags.insert(.interfaceRemoved) }
                    changes.insert(.changed(old: before, new: result, flags: flags))
                }
                for (endpoint, result) in oldByEndpoint where newByEndpoint[endpoint] == nil {
                    changes.insert(.removed(result))
                }
                return changes.isEmpty ? [.identical] : changes
            }
        }
    }
}
