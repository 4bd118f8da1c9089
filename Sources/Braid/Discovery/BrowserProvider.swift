/// What a `NetworkBrowser` browses for: today `Bonjour`, DNS-SD services over multicast DNS.
public protocol BrowserProvider: Sendable {
    /// What the browser reports for each service found.
    associatedtype Endpoint: Sendable
    /// The type and domain as DNS names, and whether results carry TXT records.
    var browseRequest: BrowseRequest { get }
    /// The endpoint for one result.
    static func endpoint(for result: NWBrowser.Result) -> Endpoint
}
