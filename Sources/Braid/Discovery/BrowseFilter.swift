import BraidDiscovery

/// The parameters' interface rules for discovery: which interfaces a browser queries and takes
/// results on and a listener advertises on (a required interface or interface type, prohibited
/// ones, no expensive or constrained interfaces when those are prohibited), by the rules
/// connections follow (`InterfaceConstraints.violation`).
struct BrowseFilter: Sendable {
    var constraints: InterfaceConstraints

    init(constraints: InterfaceConstraints) {
        self.constraints = constraints
    }

    init(parameters: NWParameters?) {
        constraints = InterfaceConstraints(
            requiredInterfaceType: parameters?.requiredInterfaceType == .other ? nil : parameters?.requiredInterfaceType,
            prohibitedInterfaceTypes: parameters?.prohibitedInterfaceTypes ?? [],
            requiredInterface: parameters?.requiredInterface,
            prohibitedInterfaces: parameters?.prohibitedInterfaces ?? [],
            expensivePathsProhibited: parameters?.prohibitExpensivePaths ?? false,
            constrainedPathsProhibited: parameters?.prohibitConstrainedPaths ?? false)
    }

    /// Whether nothing is ruled out.
    var isEmpty: Bool { constraints.isEmpty }

    func allows(_ result: MDNSBrowseResult) -> Bool {
        guard let interface = DiscoveryRuntime.interface(result.interface) else { return constraints.requiredInterface == nil }
        return allows(index: Int32(interface.index), name: interface.name)
    }

    /// The filter as the discovery engine asks it, by interface index and name (nil: no
    /// constraint, every interface).
    var interfaces: (@Sendable (Int32, String) -> Bool)? {
        guard !isEmpty else { return nil }
        let filter = self
        return { filter.allows(index: $0, name: $1) }
    }

    /// Whether the interface `name` (index `index`) is allowed. Asked on the discovery's loop,
    /// whose thread sees the interfaces of its network namespace.
    func allows(index: Int32, name: String) -> Bool {
        let interface = NWInterface(type: DiscoveryRuntime.interfaceType(named: name), name: name, index: Int(index))
        return constraints.violation(by: interface, marks: NetworkInterfacePolicy.current) == nil
    }
}
