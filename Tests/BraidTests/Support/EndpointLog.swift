import BraidCore

@testable import Braid

/// The endpoints a listener's connections came from, recorded from its handlers.
final class EndpointLog: Sendable {
    private let entries = Locked<[NWEndpoint]>([])

    func append(_ endpoint: NWEndpoint) { entries.withLock { $0.append(endpoint) } }

    var all: [NWEndpoint] { entries.withLock { $0 } }

    /// The hosts recorded, in any order.
    var hosts: Set<String> {
        Set(all.compactMap { if case .hostPort(let host, _) = $0 { "\(host)" } else { nil } })
    }
}
