/// A DNS-SD service a `NetworkListener` advertises once it is ready: a name (nil: the host's
/// name), a type ("_game._tcp"), a domain (nil: "local.", the only one Braid serves) and a TXT
/// record (nil: an empty one).
///
/// ```swift
/// let provider = BonjourListenerProvider(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"]))
/// let listener = try NetworkListener(for: provider) { TCP() }
/// ```
public struct BonjourListenerProvider: ListenerProvider {
    /// The service advertised by the listener.
    public var service: NWListener.Service

    /// A service to advertise.
    public init(name: String? = nil, type: String, domain: String? = nil, txtRecord: NWTXTRecord? = nil) {
        if let txtRecord {
            service = NWListener.Service(name: name, type: type, domain: domain, txtRecord: txtRecord)
        } else {
            service = NWListener.Service(name: name, type: type, domain: domain)
        }
    }
}

extension ListenerProvider where Self == BonjourListenerProvider {
    /// A DNS-SD service to advertise: `BonjourListenerProvider(name:type:domain:txtRecord:)`.
    public static func bonjour(name: String? = nil, type: String, domain: String? = nil, txtRecord: NWTXTRecord? = nil) -> BonjourListenerProvider {
        BonjourListenerProvider(name: name, type: type, domain: domain, txtRecord: txtRecord)
    }
}
