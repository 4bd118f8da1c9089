import BraidDiscovery

/// The parameters' interface rules applied to browse results: a required interface type or
/// interface, prohibited types and interfaces.
struct BrowseFilter: Sendable {
    var requiredInterface: NWInterface?
    var requiredType: NWInterface.InterfaceType?
    var prohibitedTypes: [NWInterface.InterfaceType]
    var prohibitedInterfaces: [NWInterface]

    init(parameters: NWParameters?) {
        requiredInterface = parameters?.requiredInterface
        requiredType = parameters?.requiredInterfaceType == .other ? nil : parameters?.requiredInterfaceType
        prohibitedTypes = parameters?.prohibitedInterfaceTypes ?? []
        prohibitedInterfaces = parameters?.prohibitedInterfaces ?? []
    }

    func allows(_ result: MDNSBrowseResult) -> Bool {
        guard let interface = DiscoveryRuntime.interface(result.interface) else { return requiredInterface == nil }
        if let requiredInterface, requiredInterface.index != interface.index { return false }
        if prohibitedInterfaces.contains(where: { $0.index == interface.index }) { return false }
        let type = DiscoveryRuntime.interfaceType(named: interface.name)
        if let requiredType, requiredType != type { return false }
        return !prohibitedTypes.contains(type)
    }
}
