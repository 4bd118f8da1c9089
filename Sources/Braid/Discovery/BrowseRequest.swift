/// A provider's request: what `NetworkBrowser` asks multicast DNS for.
public struct BrowseRequest: Sendable, Hashable {
    let type: String
    let domain: String?
    let includeTXTRecord: Bool
}
