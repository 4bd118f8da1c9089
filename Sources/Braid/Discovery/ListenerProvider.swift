/// What a `NetworkListener` advertises, so that browsers find it: today
/// `BonjourListenerProvider`, a DNS-SD service over multicast DNS.
///
/// ```swift
/// let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp")) { TCP() }
/// ```
public protocol ListenerProvider: Sendable {
    /// The service the listener advertises.
    var service: NWListener.Service { get }
}
