import BraidDiscovery

/// Where browsers and advertised services get multicast DNS from: Braid's own querier and
/// responder (`MDNSDiscovery`), or the system's avahi-daemon (`AvahiDiscovery`). Both speak the
/// embedded engine's values: a browse reports whole lists of `MDNSBrowseResult`s, each resolved
/// as far as it is heard (SRV target, port, addresses, TXT), and an advertisement reports
/// `MDNSResponder.Event`s (registered under a name, renamed after a conflict, withdrawn for
/// a while). Callbacks arrive
/// on a thread of the back end's, never concurrently with themselves for one ID, and may call
/// back into the back end (to stop, say).
///
/// Both take an interface policy, `interfaces`: called with an interface's index and name, it
/// says whether the browse or advertisement may use that interface (nil: every interface).
package protocol DiscoveryBackend: AnyObject, Sendable {
    /// "embedded" or "avahi": which back end this is, for messages and logs.
    var name: String { get }

    /// Starts browsing for `type` (`_name._tcp.local`) on the interfaces `interfaces` allows;
    /// `onChange` gets every new list of results.
    func browse(
        type: DNSName, interfaces: (@Sendable (Int32, String) -> Bool)?,
        onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void
    ) -> UInt64

    /// Stops the browse with this ID (no more lists after it returns, but one already on its way).
    func stopBrowsing(_ id: UInt64)

    /// Whether the browse with this ID is still running.
    func isBrowsing(_ id: UInt64) async -> Bool

    /// Starts advertising `service` on the interfaces `interfaces` allows; `onEvent` gets its
    /// registration and renames.
    func advertise(
        _ service: MDNSServiceDescription, interfaces: (@Sendable (Int32, String) -> Bool)?,
        onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void
    ) -> UInt64

    /// Stops advertising (the back end says goodbye for it).
    func stopAdvertising(_ id: UInt64)

    /// Gives the advertisement with this ID a new TXT record, announced in place of the old one
    /// under the same name: no goodbye, no probe (RFC 6762 §8.4).
    func updateTXT(_ id: UInt64, txt: [[UInt8]])
}

extension MDNSDiscovery: DiscoveryBackend {
    package var name: String { "embedded" }
}
