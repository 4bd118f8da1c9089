import BraidDiscoveryIO
import Foundation
import Synchronization

/// Which multicast DNS back end discovery uses, from `BRAID_DISCOVERY_BACKEND`:
/// - unset, empty or `auto`: the system's avahi-daemon when it answers on the D-Bus system bus,
///   Braid's embedded querier and responder otherwise;
/// - `avahi`: the daemon, and `NetworkError.invalidConfiguration` when it does not answer;
/// - `embedded`: Braid's own, even where a daemon runs.
///
/// The variable is read when a browser, advertisement or resolution starts. With either choice
/// that reaches the daemon, a daemon that goes away later hands what runs through it to the
/// embedded engine (see `AvahiDiscovery`), and new work goes to the embedded engine until a
/// daemon answers again.
enum DiscoveryBackendChoice: String, Sendable {
    case automatic = "auto"
    case avahi
    case embedded

    /// The environment variable that chooses.
    static let variable = "BRAID_DISCOVERY_BACKEND"

    static func fromEnvironment() throws -> DiscoveryBackendChoice {
        let value = ProcessInfo.processInfo.environment[variable] ?? ""
        if value.isEmpty { return .automatic }
        guard let choice = DiscoveryBackendChoice(rawValue: value.lowercased()) else {
            throw NetworkError.invalidConfiguration("\(variable)=\(value) is not a discovery back end: use auto, avahi or embedded")
        }
        return choice
    }

    /// The daemon's client while it is connected. A failed attempt is not kept: the next
    /// browser or advertisement asks the bus again (a daemon may have started since).
    private static let daemon = Mutex<AvahiDiscovery?>(nil)

    func backend() throws -> any DiscoveryBackend {
        switch self {
        case .embedded:
            return try DiscoveryRuntime.embedded()
        case .avahi:
            do {
                return try Self.connected()
            } catch {
                throw NetworkError.invalidConfiguration(
                    "\(Self.variable)=avahi asks for avahi-daemon, which does not answer on the D-Bus system bus (\(error)): start avahi-daemon, or unset \(Self.variable) to use Braid's own multicast DNS")
            }
        case .automatic:
            if let daemon = try? Self.connected() { return daemon }
            return try DiscoveryRuntime.embedded()
        }
    }

    /// The connected daemon's client, connecting when there is none or the last one lost it.
    private static func connected() throws(AvahiError) -> AvahiDiscovery {
        try daemon.withLock { daemon throws(AvahiError) -> AvahiDiscovery in
            if let daemon, daemon.lost == nil { return daemon }
            let made = try AvahiDiscovery(fallback: { try DiscoveryRuntime.embedded() })
            daemon = made
            return made
        }
    }
}
