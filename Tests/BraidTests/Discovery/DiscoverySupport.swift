import Braid
import BraidCore
import Dispatch
import Foundation
import Testing

/// A service type no other test or host uses: each test browses for its own, so other mDNS
/// traffic on the machine never reaches its results.
func uniqueServiceType(_ proto: String = "_tcp") -> String {
    "_b" + String(UInt32.random(in: 0...UInt32.max), radix: 16) + "." + proto
}

/// Polls `condition` until it holds or `deadline` passes (then records what `describe` says).
func waitUntil(
    _ what: String, deadline: Duration = .seconds(90), describe: @Sendable () -> String = { "" },
    _ condition: @Sendable () -> Bool
) async throws {
    let end = ContinuousClock.now + deadline
    while ContinuousClock.now < end {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting for \(what); \(describe())")
    throw CancellationError()
}

/// What a classic browser reported, kept for a test to wait on.
final class BrowseRecorder: Sendable {
    let results = Locked<Set<NWBrowser.Result>>([])
    let changes = Locked<[Set<NWBrowser.Result.Change>]>([])
    let states = Locked<[NWBrowser.State]>([])

    init(_ browser: NWBrowser) {
        browser.browseResultsChangedHandler = { [self] results, changes in
            self.results.withLock { $0 = results }
            self.changes.withLock { $0.append(changes) }
        }
        browser.stateUpdateHandler = { [self] state in states.withLock { $0.append(state) } }
    }

    func result(named name: String) -> NWBrowser.Result? {
        results.withLock { results in
            results.first { if case .service(name, _, _, _) = $0.endpoint { true } else { false } }
        }
    }

    var names: [String] {
        results.withLock { results in
            results.compactMap { if case .service(let name, _, _, _) = $0.endpoint { name } else { nil } }.sorted()
        }
    }
}

/// A classic TCP listener that echoes, advertising `service`, recording its registrations.
final class AdvertisedEcho: Sendable {
    let listener: NWListener
    let registrations = Locked<[NWListener.ServiceRegistrationChange]>([])

    init(_ service: NWListener.Service) throws {
        listener = try NWListener(using: .tcp)
        listener.service = service
        listener.newConnectionHandler = { connection in
            connection.start(queue: .global())
            @Sendable func echo() {
                connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, error in
                    guard error == nil else { return }
                    if let content {
                        connection.send(content: content, completion: .contentProcessed { _ in })
                    }
                    if isComplete { connection.cancel() } else { echo() }
                }
            }
            echo()
        }
        listener.serviceRegistrationUpdateHandler = { [self] change in self.registrations.withLock { $0.append(change) } }
        listener.start(queue: .global())
    }

    var addedNames: [String] {
        registrations.withLock { changes in
            changes.compactMap { if case .add(.service(let name, _, _, _)) = $0 { name } else { nil } }
        }
    }
}
