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
