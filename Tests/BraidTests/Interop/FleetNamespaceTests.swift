import BraidCore
import BraidIO
import BraidPerf
import Foundation
import Testing

@testable import Braid

/// Two server hosts and a client, each in a network namespace the test makes, joined by veth
/// links and the kernel's routing. Both hosts hold the service address 10.80.0.9 on their
/// loopback, as hosts behind a balancer do; the client reaches it through one host's link or
/// the other's, switched with `ip route replace` as a balancer would move a flow. The client
/// keeps one address (10.79.0.1) whichever link it uses, so the hosts see the same client.
///
/// The client is aioquic (`fleet_client.py`, `aioquic_peer.py`), which decodes the server ID
/// in every connection ID it is given from the specifications, not from Braid's encoder.
@Suite(.timeLimit(.minutes(5)), .serialized) struct FleetNamespaceTests {
    static let service = "10.80.0.9"
    static let clientAddress = "10.79.0.1"
    static let port: UInt16 = 4433

    /// The client's namespace and the hosts', the client's route to the service through host 0.
    static func withFleet<T: Sendable>(_ body: (_ client: NetworkNamespace, _ hosts: [NetworkNamespace]) async throws -> T) async throws -> T {
        try await NetworkNamespace.with { client in
            try await NetworkNamespace.with { first in
                try await NetworkNamespace.with { second in
                    try await client.ip("address", "add", "\(clientAddress)/32", "dev", "lo")
                    for (index, host) in [first, second].enumerated() {
                        let subnet = 81 + index
                        try await client.addVethPair(
                            "host\(index)", address: "10.\(subnet).0.1", peer: "uplink", peerAddress: "10.\(subnet).0.2", peerNamespace: host)
                        try await host.ip("address", "add", "\(service)/32", "dev", "lo")
                        try await host.ip("route", "add", "\(clientAddress)/32", "via", "10.\(subnet).0.1")
                    }
                    try await client.ip(routeArguments(toHost: 0))
                    return try await body(client, [first, second])
                }
            }
        }
    }

    /// `ip route replace` sending the client's packets for the service to host `index`.
    static func routeArguments(toHost index: Int) -> [String] {
        ["route", "replace", "\(service)/32", "via", "10.\(81 + index).0.2", "src", clientAddress]
    }

    /// A QUIC echo listener on the service address in `host`, on a loop inside it, recording
    /// each connection it serves under `name`.
    final class Host: Sendable {
        let name: String
        let listener: NetworkListener<QUIC>
        /// The clients this host served, by address.
        let served = PeerLog()
        private let loop: EventLoop
        private let task: Task<Void, any Error>

        init(_ name: String, in namespace: NetworkNamespace, _ quic: QUIC) async throws {
            self.name = name
            loop = try EventLoop(name: "braid-fleet-\(name)")
            try await loop.submit { _ in try namespace.enterOnCurrentThread() }
            let environment = NetworkEnvironment(loop: loop, sockets: UDPSockets())
            let listener = NetworkListener(
                for: .hostPort(host: .init(FleetNamespaceTests.service), port: .init(integerLiteral: FleetNamespaceTests.port)),
                using: .parameters { quic.identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")) })
            self.listener = listener
            let served = served
            task = NetworkEnvironment.$current.withValue(environment) {
                Task {
                    try await listener.run { connection in
                        served.record(connection.endpoint)
                        try await echo(connection)
                    }
                }
            }
            try await listener.waitUntilReady()
        }

        var statistics: ListenerStatistics {
            get async throws { try #require(await listener.statistics, "\(name)'s listener is closed") }
        }

        func stop() async {
            task.cancel()
            _ = try? await task.value
            loop.shutdown()
        }
    }

    /// Runs a peer script in the client's namespace; returns its one JSON object.
    static func runClient(in client: NetworkNamespace, script: String, _ arguments: [String]) async throws -> [String: Any] {
        let path = PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/\(script)").path
        let child = try ChildProcess(try NetworkNamespace.ipExecutable, ["netns", "exec", client.name, try PeerProcess.aioquicPython, path] + arguments)
        let exit = try await child.finish(within: 90)
        let line = child.output.split(separator: "\n").last.map(String.init) ?? ""
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw NamespaceFailure("\(script) (exit \(exit.status)) printed no JSON: \(child.output) \(child.errors)")
        }
        return object
    }

    /// A connection-ID format and the server IDs it gives each host, with the arguments that
    /// let `fleet_client.py` decode them and what it should decode.
    struct Layout: Sendable, CustomTestStringConvertible {
        let label: String
        let formats: [QUIC.ConnectionIDFormat]
        let decoder: [String]
        let expected: [String]
        var testDescription: String { label }

        static let key = Data((0..<16).map { UInt8($0 * 17 & 0xff) })
        static let keyHex = key.map { String(format: "%02x", $0) }.joined()

        static let all: [Layout] = [
            Layout(
                label: "QUIC-LB in clear",
                formats: [.quicLB(configRotation: 0, serverID: Data([0x0a, 0x01]), nonceLength: 6), .quicLB(configRotation: 0, serverID: Data([0x0a, 0x02]), nonceLength: 6)],
                decoder: ["--format", "quic-lb", "--server-id-length", "2", "--nonce-length", "6"], expected: ["0a01", "0a02"]),
            Layout(
                label: "QUIC-LB four-pass",
                formats: [
                    .quicLB(configRotation: 1, serverID: Data([0x31, 0x44, 0x1a]), nonceLength: 5, key: key),
                    .quicLB(configRotation: 1, serverID: Data([0x31, 0x44, 0x1b]), nonceLength: 5, key: key),
                ],
                decoder: ["--format", "quic-lb", "--server-id-length", "3", "--nonce-length", "5", "--key", keyHex], expected: ["31441a", "31441b"]),
            Layout(
                label: "QUIC-LB single-pass",
                formats: [
                    .quicLB(configRotation: 2, serverID: Data(repeating: 0xa1, count: 8), nonceLength: 8, key: key),
                    .quicLB(configRotation: 2, serverID: Data(repeating: 0xb2, count: 8), nonceLength: 8, key: key),
                ],
                decoder: ["--format", "quic-lb", "--server-id-length", "8", "--nonce-length", "8", "--key", keyHex],
                expected: [String(repeating: "a1", count: 8), String(repeating: "b2", count: 8)]),
            Layout(
                label: "Katran v1", formats: [.katran(version: .v1, serverID: 0x1234), .katran(version: .v1, serverID: 0xfedc)],
                decoder: ["--format", "katran"], expected: ["1234", "fedc"]),
            Layout(
                label: "Katran v3", formats: [.katran(version: .v3, serverID: 0x0102_0304), .katran(version: .v3, serverID: 0xa0b0_c0d0)],
                decoder: ["--format", "katran"], expected: ["1020304", "a0b0c0d0"]),
        ]
    }

    static let clientArguments = ["--host", service, "--port", "\(port)", "--ca", Fixtures.caFile, "--sni", "localhost", "--alpn", "echo"]

    /// Every ID each host gives a client (its first, and the new ones it issues as the client
    /// moves to a new port and a new ID three times) names that host.
    @Test(arguments: Layout.all) func everyConnectionIDAHostIssuesNamesThatHost(_ layout: Layout) async throws {
        try await Self.withFleet { client, namespaces in
            var hosts: [Host] = []
            for (index, namespace) in namespaces.enumerated() {
                hosts.append(try await Host("host\(index)", in: namespace, QUIC(alpn: ["echo"]).testTimeouts().connectionIDFormat(layout.formats[index])))
            }
            for index in hosts.indices {
                try await client.ip(Self.routeArguments(toHost: index))
                let report = try await Self.runClient(
                    in: client, script: "fleet_client.py", Self.clientArguments + layout.decoder + ["--migrations", "3"])
                #expect(report["error"] is NSNull, "\(report)")
                #expect(report["echoes"] as? Int == 4, "an echo after the handshake and after each of 3 moves: \(report)")
                let serverIDs = try #require(report["server_ids"] as? [String])
                #expect(serverIDs.count >= 4, "the first ID and at least one new one per move: \(report)")
                #expect(serverIDs.allSatisfy { $0 == layout.expected[index] }, "\(hosts[index].name) should be \(layout.expected[index]): \(report)")
                #expect(hosts[index].served.count == 1)
            }
            for host in hosts { await host.stop() }
        }
    }

    /// A Retry minted on one host; the client's answer, with its token, reaches the other
    /// (the route moves in between), which accepts the token and completes the handshake
    /// without a Retry of its own. Without shared keys the other host cannot read the token.
    @Test(arguments: [true, false]) func aRetryTokenFromOneHostIsAcceptedByAnother(sharingKeys: Bool) async throws {
        try await Self.withFleet { client, namespaces in
            let shared = try QUIC.FleetKeys(secrets: [Data(repeating: 0x5a, count: 32)])
            var hosts: [Host] = []
            for (index, namespace) in namespaces.enumerated() {
                let keys = sharingKeys ? shared : try QUIC.FleetKeys(secrets: [Data(repeating: UInt8(index + 1), count: 32)])
                let quic = QUIC(alpn: ["echo"]).testTimeouts().retry(true).fleetKeys(keys).connectionIDFormat(Layout.all[1].formats[index])
                hosts.append(try await Host("host\(index)", in: namespace, quic))
            }
            let moveToSecondHost = ([try NetworkNamespace.ipExecutable] + Self.routeArguments(toHost: 1)).joined(separator: " ")
            let report = try await Self.runClient(
                in: client, script: "fleet_client.py",
                Self.clientArguments + Layout.all[1].decoder + ["--after-retry", moveToSecondHost, "--timeout", "10"])
            #expect(report["retry"] as? Bool == true, "\(report)")
            #expect(try await hosts[0].statistics.retriesSent == 1)
            #expect(try await hosts[0].statistics.connections == 0, "the first host keeps no state for a client it sent a Retry")
            if sharingKeys {
                #expect(report["error"] is NSNull, "\(report)")
                #expect(report["echoes"] as? Int == 1, "\(report)")
                #expect(try await hosts[1].statistics.retriesSent == 0, "the second host accepted the first's token")
                #expect(hosts[1].served.count == 1)
                let serverIDs = try #require(report["server_ids"] as? [String])
                #expect(serverIDs.first == Layout.all[1].expected[0], "the Retry's ID is the first host's: \(report)")
                #expect(serverIDs.dropFirst().allSatisfy { $0 == Layout.all[1].expected[1] }, "the rest are the second's: \(report)")
            } else {
                #expect(!(report["error"] is NSNull), "a token the second host cannot read must not complete a handshake: \(report)")
                #expect(hosts[1].served.count == 0)
            }
            for host in hosts { await host.stop() }
        }
    }

    /// A session ticket from one host resumes, with 0-RTT data, on the other when both hold
    /// the same keys; with their own keys the other host does a full handshake instead.
    @Test(arguments: [true, false]) func aTicketFromOneHostResumesWithEarlyDataOnAnother(sharingKeys: Bool) async throws {
        try await Self.withFleet { client, namespaces in
            let shared = try QUIC.FleetKeys(secrets: [Data(repeating: 0x3c, count: 32)])
            var hosts: [Host] = []
            for (index, namespace) in namespaces.enumerated() {
                let keys = sharingKeys ? shared : try QUIC.FleetKeys(secrets: [Data(repeating: UInt8(index + 7), count: 32)])
                hosts.append(try await Host("host\(index)", in: namespace, QUIC(alpn: ["echo"]).testTimeouts().fleetKeys(keys)))
            }
            let sessionFile = FileManager.default.temporaryDirectory.appendingPathComponent("braid-fleet-ticket-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: sessionFile) }
            let arguments = ["client"] + Self.clientArguments + ["--session-file", sessionFile, "--streams", "2", "--bytes", "3000"]
            let first = try await Self.runClient(in: client, script: "aioquic_peer.py", arguments)
            #expect(first["ok"] as? Bool == true, "\(first)")
            #expect(hosts[0].served.count == 1)
            try await client.ip(Self.routeArguments(toHost: 1))
            let second = try await Self.runClient(in: client, script: "aioquic_peer.py", arguments)
            #expect(second["ok"] as? Bool == true, "\(second)")
            #expect(second["early_data_attempted"] as? Bool == true, "the client had a ticket with early data allowed: \(second)")
            #expect(hosts[1].served.count == 1)
            #expect(second["early_data"] as? Bool == sharingKeys, "\(second)")
            for host in hosts { await host.stop() }
        }
    }

    /// The keys rotate on both hosts in the three documented steps (the new secret added
    /// second, moved first, the old one removed) while four connections are open: each still
    /// echoes after every step, and a ticket minted under the old secret before the rotation
    /// still resumes with early data on the other host, within the overlap.
    @Test func aKeyRotationWhileConnectionsAreOpenLosesNone() async throws {
        try await Self.withFleet { client, namespaces in
            let old = Data(repeating: 0x11, count: 32)
            let new = Data(repeating: 0x22, count: 32)
            var hosts: [Host] = []
            var keys: [QUIC.FleetKeys] = []
            for (index, namespace) in namespaces.enumerated() {
                // Each host loads its own copy, as separate machines would from their key files.
                let hostKeys = try QUIC.FleetKeys(secrets: [old], overlap: .seconds(3600))
                keys.append(hostKeys)
                hosts.append(try await Host("host\(index)", in: namespace, QUIC(alpn: ["echo"]).testTimeouts().fleetKeys(hostKeys)))
            }
            let sessionFile = FileManager.default.temporaryDirectory.appendingPathComponent("braid-fleet-ticket-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: sessionFile) }
            let ticketArguments = ["client"] + Self.clientArguments + ["--session-file", sessionFile, "--streams", "1", "--bytes", "1000"]
            let minting = try await Self.runClient(in: client, script: "aioquic_peer.py", ticketArguments)
            #expect(minting["ok"] as? Bool == true, "\(minting)")

            try await UplinkNamespaces.withLoop(in: client) { environment in
                let connections = NetworkEnvironment.$current.withValue(environment) {
                    (0..<4).map { _ in
                        NetworkConnection(to: .hostPort(host: .init(Self.service), port: .init(integerLiteral: Self.port))) { testClient() }
                    }
                }
                defer { for connection in connections { connection.cancel() } }
                for connection in connections { try await UplinkNamespaces.ready(connection) }
                func echoOnEach(_ label: String) async throws {
                    for (index, connection) in connections.enumerated() {
                        let message = Data("\(label) on connection \(index)".utf8)
                        let stream = try await connection.openStream()
                        try await stream.send(message, endOfStream: true)
                        var echoed = Data()
                        while true {
                            let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 65536)
                            echoed += content
                            if metadata.isEndOfStream { break }
                        }
                        #expect(echoed == message, "\(label), connection \(index)")
                    }
                }
                try await echoOnEach("before the rotation")
                for (step, secrets) in [("added", [old, new]), ("moved first", [new, old]), ("old removed", [new])] {
                    for hostKeys in keys { try hostKeys.update(secrets: secrets) }
                    try await echoOnEach("new key \(step)")
                }
            }
            #expect(hosts[0].served.count == 5, "the ticket's connection and the four")
            try await client.ip(Self.routeArguments(toHost: 1))
            let resumed = try await Self.runClient(in: client, script: "aioquic_peer.py", ticketArguments)
            #expect(resumed["ok"] as? Bool == true, "\(resumed)")
            #expect(resumed["early_data"] as? Bool == true, "a ticket of the retired generation is accepted within the overlap: \(resumed)")
            #expect(hosts[1].served.count == 1)
            for host in hosts { await host.stop() }
        }
    }
}
