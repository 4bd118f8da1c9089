import BraidCore
import BraidIO
import Foundation

/// Which interfaces count as expensive or constrained, beyond what the kernel shows. Apple's
/// platforms know this from the system (cellular plans, Low Data Mode); Linux does not, so a
/// deployment says it: a metered uplink, a tethered phone, a satellite link.
///
/// Cellular (WWAN) interfaces are always expensive. Every other interface is inexpensive and
/// unconstrained unless marked here, by name or by a name prefix ending in `*` (`wwan*`,
/// `usb*`). Marks start from two environment variables, read once when first needed, each a
/// comma- or space-separated list:
///
/// - `BRAID_EXPENSIVE_INTERFACES=eth1,usb*`
/// - `BRAID_CONSTRAINED_INTERFACES=wlan1`
///
/// Changing the marks re-evaluates every running `NWPathMonitor` at once, and wakes the
/// connections waiting for an interface their parameters allow (`expensivePathsProhibited`).
///
/// ```swift
/// NetworkInterfacePolicy.expensiveInterfaces.insert("eth1")
/// NetworkInterfacePolicy.constrainedInterfaces = ["usb*"]
/// ```
public enum NetworkInterfacePolicy {
    /// Names (or `prefix*` patterns) of the interfaces to treat as expensive.
    public static var expensiveInterfaces: Set<String> {
        get { marks.withLock { $0.expensive } }
        set {
            marks.withLock { $0.expensive = newValue }
            NWPathMonitor.policyChanged()
            InterfaceChanges.wakeAll()
        }
    }

    /// Names (or `prefix*` patterns) of the interfaces to treat as constrained.
    public static var constrainedInterfaces: Set<String> {
        get { marks.withLock { $0.constrained } }
        set {
            marks.withLock { $0.constrained = newValue }
            NWPathMonitor.policyChanged()
            InterfaceChanges.wakeAll()
        }
    }

    /// The environment variable `expensiveInterfaces` starts from.
    public static let expensiveInterfacesVariable = "BRAID_EXPENSIVE_INTERFACES"
    /// The environment variable `constrainedInterfaces` starts from.
    public static let constrainedInterfacesVariable = "BRAID_CONSTRAINED_INTERFACES"

    /// Both sets at once, for one evaluation.
    struct Marks: Sendable {
        var expensive: Set<String>
        var constrained: Set<String>

        func isExpensive(_ name: String) -> Bool { Self.matches(name, expensive) }
        func isConstrained(_ name: String) -> Bool { Self.matches(name, constrained) }

        private static func matches(_ name: String, _ patterns: Set<String>) -> Bool {
            patterns.contains { pattern in
                pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : name == pattern
            }
        }
    }

    static var current: Marks { marks.withLock { $0 } }

    private static let marks = Locked<Marks>(marks(from: ProcessInfo.processInfo.environment))

    /// The marks an environment sets.
    static func marks(from environment: [String: String]) -> Marks {
        Marks(expensive: names(in: environment[expensiveInterfacesVariable]), constrained: names(in: environment[constrainedInterfacesVariable]))
    }

    /// The names in a comma- or space-separated list.
    static func names(in list: String?) -> Set<String> {
        Set((list ?? "").split { $0 == "," || $0 == " " || $0 == "\t" }.map(String.init))
    }
}
