@testable import Braid
import BraidCore
import Testing

/// Resolving a `.service` endpoint from a task that is cancelled before the lookup starts.
@Suite(.timeLimit(.minutes(1))) struct ServiceResolverTests {
    @Test func aResolutionInACancelledTaskFailsAsCancelled() async throws {
        let endpoint = NWEndpoint.service(name: "Nobody", type: uniqueServiceType(), domain: "local.", interface: nil)
        let task = Task { () async throws -> [SocketAddress] in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await ServiceResolver.addresses(for: endpoint)
        }
        // Without an answer the lookup would end as not found after its timeout; a cancelled one
        // ends as cancelled.
        await #expect {
            _ = try await task.value
        } throws: { error in
            guard let error = error as? NetworkError, case .cancelled = error else { return false }
            return true
        }
    }
}
