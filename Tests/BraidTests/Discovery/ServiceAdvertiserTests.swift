import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import Dispatch
import Foundation
import Testing

@testable import Braid

/// `ServiceAdvertiser` against a back end that records what it is asked and lets the test
/// play its events: what a new TXT record, a withdrawal by the back end and a race between a
/// registration and a withdrawal turn into.
@Suite struct ServiceAdvertiserTests {
    final class RecordingBackend: DiscoveryBackend, Sendable {
        struct Calls {
            var advertised: [(id: UInt64, service: MDNSServiceDescription)] = []
            var stopped: [UInt64] = []
            var updated: [(id: UInt64, txt: [[UInt8]])] = []
            var handlers: [UInt64: @Sendable (MDNSResponder.Event) -> Void] = [:]
        }
        let calls = Locked(Calls())
        let ids = Locked<UInt64>(0)

        var name: String { "recording" }
        func browse(type: DNSName, interfaces: (@Sendable (Int32, String) -> Bool)?, onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void) -> UInt64 { 0 }
        func stopBrowsing(_ id: UInt64) {}
        func isBrowsing(_ id: UInt64) async -> Bool { false }
        func advertise(
            _ service: MDNSServiceDescription, interfaces: (@Sendable (Int32, String) -> Bool)?,
            onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void
        ) -> UInt64 {
            let id = ids.withLock { $0 += 1; return $0 }
            calls.withLock { $0.advertised.append((id, service)); $0.handlers[id] = onEvent }
            return id
        }
        func stopAdvertising(_ id: UInt64) { calls.withLock { $0.stopped.append(id) } }
        func updateTXT(_ id: UInt64, txt: [[UInt8]]) { calls.withLock { $0.updated.append((id, txt)) } }

        func send(_ event: MDNSResponder.Event, to id: UInt64) {
            calls.withLock { $0.handlers[id] }?(event)
        }
    }

    final class Recorder: Sendable {
        final class Changes: Sendable {
            let list = Locked<[NWListener.ServiceRegistrationChange]>([])
        }
        let delivered: Changes
        let backend: RecordingBackend
        let advertiser: ServiceAdvertiser

        init() {
            let delivered = Changes(), backend = RecordingBackend()
            self.delivered = delivered
            self.backend = backend
            advertiser = ServiceAdvertiser(filter: BrowseFilter(parameters: nil), backend: backend) { change in
                delivered.list.withLock { $0.append(change) }
            } onConflict: { _ in }
        }

        var changes: [NWListener.ServiceRegistrationChange] { delivered.list.withLock { $0 } }
    }

    static func endpoint(_ name: String) -> NWEndpoint { .service(name: name, type: "_game._tcp", domain: "local.", interface: nil) }

    /// Waits for the advertiser's queued deliveries.
    static func settled(_ advertiser: ServiceAdvertiser) {
        // `stop` returns once every change it and those before it made is delivered.
        advertiser.stop()
    }

    @Test func aNewTXTRecordAloneIsAnUpdateNotANewRegistration() throws {
        let recorder = Recorder()
        let advertiser = recorder.advertiser
        try advertiser.advertise(NWListener.Service(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"])), port: 4242)
        recorder.backend.send(.registered(instance: Array("Table 7".utf8)), to: 1)
        try advertiser.advertise(NWListener.Service(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "5"])), port: 4242)
        var calls = recorder.backend.calls.withLock { ($0.advertised.map { $0.id }, $0.stopped, $0.updated.map { $0.id }, $0.updated.map { $0.txt }) }
        #expect(calls.0 == [1])
        #expect(calls.1.isEmpty)
        #expect(calls.2 == [1])
        #expect(calls.3 == [[Array("players=5".utf8)]])
        #expect(advertiser.service?.txtRecord == NWTXTRecord(["players": "5"]).data)

        // Another name is another registration: the old one goes first.
        try advertiser.advertise(NWListener.Service(name: "Table 8", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "5"])), port: 4242)
        calls = recorder.backend.calls.withLock { ($0.advertised.map { $0.id }, $0.stopped, $0.updated.map { $0.id }, $0.updated.map { $0.txt }) }
        #expect(calls.0 == [1, 2])
        #expect(calls.1 == [1])
        Self.settled(advertiser)
        #expect(recorder.changes == [.add(Self.endpoint("Table 7")), .remove(Self.endpoint("Table 7"))])
    }

    @Test func aWithdrawalByTheBackEndIsARemoveAndItsReturnAnAdd() throws {
        let recorder = Recorder()
        let advertiser = recorder.advertiser
        try advertiser.advertise(NWListener.Service(name: "Table 7", type: "_game._tcp"), port: 4242)
        let name = Array("Table 7".utf8)
        recorder.backend.send(.registered(instance: name), to: 1)
        recorder.backend.send(.withdrawn(instance: name), to: 1)
        recorder.backend.send(.registered(instance: name), to: 1)
        Self.settled(advertiser)
        let table = Self.endpoint("Table 7")
        #expect(recorder.changes == [.add(table), .remove(table), .add(table), .remove(table)])
    }

    /// A registration reported on the back end's thread while the application withdraws the
    /// service on another: whichever wins, the changes delivered are `add` then `remove`, or
    /// nothing, never a `remove` overtaken by its `add` (which would leave the application
    /// believing a withdrawn service advertised). Many rounds, each a fresh race.
    @Test func aRemoveNeverOvertakesItsAdd() async throws {
        let rounds = 3000
        let table = Self.endpoint("Table 7")
        // The rounds block their thread (concurrentPerform, the advertiser's flush): a thread of
        // their own, not one of the few Swift concurrency runs every test on.
        let wrong = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[[NWListener.ServiceRegistrationChange]], any Error>) in
            Thread.detachNewThread {
                do {
                    var wrong: [[NWListener.ServiceRegistrationChange]] = []
                    for _ in 0..<rounds {
                        let recorder = Recorder()
                        let advertiser = recorder.advertiser
                        try advertiser.advertise(NWListener.Service(name: "Table 7", type: "_game._tcp"), port: 4242)
                        let backend = recorder.backend
                        DispatchQueue.concurrentPerform(iterations: 2) { index in
                            if index == 0 { backend.send(.registered(instance: Array("Table 7".utf8)), to: 1) } else { advertiser.withdraw() }
                        }
                        Self.settled(advertiser)
                        let changes = recorder.changes
                        if changes != [] && changes != [.add(table), .remove(table)] { wrong.append(changes) }
                    }
                    continuation.resume(returning: wrong)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) of \(rounds) rounds delivered \(wrong.prefix(3))")
    }
}
