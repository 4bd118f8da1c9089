import BraidIO
import Foundation
import Synchronization
import Testing

@testable import Braid

/// Interface parameters against the kernel, in `UplinkNamespaces`' client and server
/// namespaces: which uplink a connection used is what the server sees, the source address of
/// its packets. A waiting connection has an hour-long retry timer, so only the path (or the
/// interface marks) can wake it.
@Suite(.timeLimit(.minutes(3))) struct InterfaceParametersNamespaceTests {
    /// What each case asks, and the client address the server must see.
    private static func cases<Stack>(_ stack: Stack) -> [(String, NetworkParameters<Stack>, String)] {
        let ipw2 = NWInterface(type: .other, name: "ipw2", index: 0)
        return [
            ("no constraint", .parameters { stack }, "10.74.0.1"),
            ("prohibitedInterfaceTypes [cellular]", .parameters { stack }.prohibitedInterfaceTypes([.cellular]), "10.75.0.1"),
            ("requiredInterfaceType other", .parameters { stack }.requiredInterfaceType(.other), "10.75.0.1"),
            ("requiredInterface ipw2", .parameters { stack }.requiredInterface(ipw2), "10.75.0.1"),
            ("expensivePathsProhibited", .parameters { stack }.expensivePathsProhibited(true), "10.75.0.1"),
            ("requiredInterfaceType cellular", .parameters { stack }.requiredInterfaceType(.cellular), "10.74.0.1"),
        ]
    }

    /// One stack's cases: a listener in the server namespace logs each client's address, and
    /// each case's connection does `exchange` (which says `what` to the server) before the
    /// address the server saw is checked.
    private static func checkCases<Client: NetworkProtocol, Server: NetworkProtocol>(
        client stack: Client, extraCases: [(String, NetworkParameters<Client>, String)] = [], server serverStack: Server,
        serverHandler: @escaping @Sendable (NetworkConnection<Server>) async throws -> Void,
        exchange: (NetworkConnection<Client>, String) async throws -> Void
    ) async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addTwoUplinks(client: client, server: server)
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let peers = PeerLog()
                let (port, serving) = try await UplinkNamespaces.serve(serverStack, in: serverEnvironment, peers: peers, serverHandler)
                defer { serving.cancel() }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    for (what, parameters, expected) in cases(stack) + extraCases {
                        let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                            NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: port), using: parameters)
                        }
                        defer { connection.cancel() }
                        try await exchange(connection, what)
                        let seen = try await peers.next()
                        #expect(seen == expected, "\(what): the server saw \(seen)")
                    }
                }
            }
        }
    }

    @Test func udpConnectionsLeaveThroughTheInterfaceTheParametersAllow() async throws {
        try await Self.checkCases(client: UDP(), server: UDP(), serverHandler: { connection in _ = try await connection.receive() }) { connection, what in
            try await UplinkNamespaces.ready(connection)
            try await connection.send(Data(what.utf8))
        }
    }

    @Test func tcpConnectionsLeaveThroughTheInterfaceTheParametersAllow() async throws {
        try await Self.checkCases(client: TCP(), server: TCP(), serverHandler: { _ in }) { connection, _ in
            try await UplinkNamespaces.ready(connection)
        }
    }

    /// TLS too, and a constrained mark (by this test alone: no other test here prohibits
    /// constrained paths, and the marks are process-wide).
    @Test func tlsConnectionsLeaveThroughTheInterfaceTheParametersAllow() async throws {
        NetworkInterfacePolicy.constrainedInterfaces.insert("wwan7")
        defer { NetworkInterfacePolicy.constrainedInterfaces.remove("wwan7") }
        let stack = testTLSClient()
        try await Self.checkCases(
            client: stack, extraCases: [("constrainedPathsProhibited", .parameters { stack }.constrainedPathsProhibited(true), "10.75.0.1")],
            server: testTLSServer(), serverHandler: echoBytes
        ) { connection, what in
            try await connection.send(Data(what.utf8))
            let (reply, _) = try await connection.receive(atLeast: what.utf8.count, atMost: 1024)
            #expect(String(decoding: reply, as: UTF8.self) == what)
        }
    }

    @Test func quicConnectionsLeaveThroughTheInterfaceTheParametersAllow() async throws {
        let identity = testServer()
        try await Self.checkCases(client: testClient(), server: identity, serverHandler: echo) { connection, what in
            let stream = try await connection.openStream()
            try await stream.send(Data(what.utf8), endOfStream: true)
            let (reply, _) = try await stream.receive(atLeast: what.utf8.count, atMost: 1024)
            #expect(String(decoding: reply, as: UTF8.self) == what)
        }
    }

    /// A listener with a required interface accepts only what arrives through it: the server's
    /// end of `ipw2`.
    @Test func aListenerWithARequiredInterfaceAcceptsOnlyThroughIt() async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addTwoUplinks(client: client, server: server)
            let serverEnd = NWInterface(type: .other, name: "sipw2", index: 0)
            let ipw2 = NWInterface(type: .other, name: "ipw2", index: 0)
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let tcpPeers = PeerLog(), udpPeers = PeerLog()
                let (tcpPort, tcpServing) = try await UplinkNamespaces.serve(TCP(), in: serverEnvironment, peers: tcpPeers, requiredInterface: serverEnd)
                defer { tcpServing.cancel() }
                let (udpPort, udpServing) = try await UplinkNamespaces.serve(UDP(), in: serverEnvironment, peers: udpPeers, requiredInterface: serverEnd) { connection in
                    _ = try await connection.receive()
                }
                defer { udpServing.cancel() }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    // Through wwan7 (the kernel's choice), the TCP listener is not there.
                    let refused = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: tcpPort)) { TCP() }
                    }
                    defer { refused.cancel() }
                    do {
                        try await UplinkNamespaces.ready(refused)
                        Issue.record("a connection through wwan7 reached a listener bound to sipw2")
                    } catch NetworkError.connectionRefused {}
                    let through = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: tcpPort), using: .parameters { TCP() }.requiredInterface(ipw2))
                    }
                    defer { through.cancel() }
                    try await UplinkNamespaces.ready(through)
                    #expect(try await tcpPeers.next() == "10.75.0.1")

                    // UDP: the datagram through wwan7 never reaches the listener, the later one
                    // through ipw2 does.
                    let (plain, pinned) = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        (
                            NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: udpPort)) { UDP() },
                            NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: udpPort), using: .parameters { UDP() }.requiredInterface(ipw2))
                        )
                    }
                    defer {
                        plain.cancel()
                        pinned.cancel()
                    }
                    try await UplinkNamespaces.ready(plain)
                    try await plain.send(Data("through wwan7".utf8))
                    try await UplinkNamespaces.ready(pinned)
                    try await pinned.send(Data("through ipw2".utf8))
                    #expect(try await udpPeers.next() == "10.75.0.1")
                }
                // QUIC: a listener bound to sipw2 serves a client that comes through ipw2.
                let quicPeers = PeerLog()
                let identity = testServer()
                let (quicPort, quicServing) = try await UplinkNamespaces.serve(identity, in: serverEnvironment, peers: quicPeers, requiredInterface: serverEnd, echo)
                defer { quicServing.cancel() }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: quicPort), using: .parameters { testClient() }.requiredInterface(ipw2))
                    }
                    defer { connection.cancel() }
                    let stream = try await connection.openStream()
                    try await stream.send(Data("pinned both ends".utf8), endOfStream: true)
                    #expect(String(decoding: try await stream.receive(atLeast: 16, atMost: 64).content, as: UTF8.self) == "pinned both ends")
                    #expect(try await quicPeers.next() == "10.75.0.1")
                }
            }
        }
    }

    /// IPv6: the same two uplinks with global addresses (no duplicate address detection, so
    /// they are usable at once) and IPv6 default routes, the server at 2001:db8:76::9.
    @Test func ipv6ConnectionsLeaveThroughTheInterfaceTheParametersAllow() async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addTwoUplinks(client: client, server: server)
            try await server.ip("address", "add", "2001:db8:76::9/128", "dev", "lo")
            for (name, subnet, metric) in [("wwan7", 74, 10), ("ipw2", 75, 20)] {
                try await client.ip("address", "add", "2001:db8:\(subnet)::1/64", "dev", name, "nodad")
                try await server.ip("address", "add", "2001:db8:\(subnet)::2/64", "dev", "s\(name)", "nodad")
                try await client.ip("-6", "route", "add", "default", "via", "2001:db8:\(subnet)::2", "dev", name, "metric", "\(metric)")
            }
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let peers = PeerLog()
                let listener = NetworkListener(for: .hostPort(host: "2001:db8:76::9", port: .any)) { UDP() }
                let serving = NetworkEnvironment.$current.withValue(serverEnvironment) {
                    Task {
                        try await listener.run { connection in
                            peers.record(connection.endpoint)
                            _ = try await connection.receive()
                        }
                    }
                }
                defer { serving.cancel() }
                try await listener.waitUntilReady()
                let port = listener.port!
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    let expected = ["10.74.0.1": "2001:db8:74::1", "10.75.0.1": "2001:db8:75::1"]
                    for (what, parameters, v4) in Self.cases(UDP()) {
                        let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                            NetworkConnection(to: .hostPort(host: "2001:db8:76::9", port: port), using: parameters)
                        }
                        defer { connection.cancel() }
                        try await UplinkNamespaces.ready(connection)
                        try await connection.send(Data(what.utf8))
                        let seen = try await peers.next()
                        #expect(seen == expected[v4], "\(what): the server saw \(seen)")
                    }
                }
            }
        }
    }

    /// A client connection that prohibits expensive paths, started where the only uplink
    /// (`uplink`, on 10.`subnet`.0.0/24) is marked expensive, with an hour-long retry timer:
    /// `body` gets it (waiting), the namespaces and the server's log of client addresses.
    private static func withConnectionWaitingOnAnExpensiveUplink<ServerStack: NetworkProtocol, ClientStack: NetworkProtocol>(
        _ uplink: String, subnet: Int, server serverStack: ServerStack,
        serving: @escaping @Sendable (NetworkConnection<ServerStack>) async throws -> Void = { _ in }, client clientStack: ClientStack,
        _ body: (NetworkConnection<ClientStack>, _ client: NetworkNamespace, _ server: NetworkNamespace, PeerLog) async throws -> Void
    ) async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addUplink(uplink, subnet: subnet, metric: 10, client: client, server: server)
            // A name of the test's own: the marks are process-wide.
            NetworkInterfacePolicy.expensiveInterfaces.insert(uplink)
            defer { NetworkInterfacePolicy.expensiveInterfaces.remove(uplink) }
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let peers = PeerLog()
                let (port, serving) = try await UplinkNamespaces.serve(serverStack, in: serverEnvironment, peers: peers, serving)
                defer { serving.cancel() }
                ClientEstablishment.retryDelaysForTesting.withLock { $0[port.rawValue] = [.seconds(3600)] }
                defer { _ = ClientEstablishment.retryDelaysForTesting.withLock { $0.removeValue(forKey: port.rawValue) } }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(
                            to: .hostPort(host: .init(UplinkNamespaces.service), port: port), using: .parameters { clientStack }.expensivePathsProhibited(true))
                    }
                    defer { connection.cancel() }
                    connection.start()
                    try await body(connection, client, server, peers)
                }
            }
        }
    }

    /// The only uplink is marked expensive: the connection waits, naming the constraint, until
    /// an unmarked uplink appears, and then leaves through it.
    @Test func expensivePathsProhibitedWaitsUntilAnInexpensiveUplinkAppears() async throws {
        try await Self.withConnectionWaitingOnAnExpensiveUplink("ipexp0", subnet: 71, server: TCP(), client: TCP()) { connection, client, server, peers in
            let error = try await UplinkNamespaces.waitingError(connection)
            #expect(error == .noAllowedInterface(reason: "expensive paths prohibited (ipexp0 is expensive)"))
            #expect(error.description.hasPrefix("No interface satisfies the parameters: expensive paths prohibited (ipexp0 is expensive)."))
            #expect(connection.state == .waiting(error) || connection.state == .preparing, "\(connection.state)")
            #expect(peers.count == 0)

            try await UplinkNamespaces.addUplink("ipfree0", subnet: 72, metric: 50, client: client, server: server)
            try await UplinkNamespaces.ready(connection)
            #expect(try await peers.next() == "10.72.0.1")
        }
    }

    /// The mark is removed while the connection waits: it connects at once, over the uplink
    /// that was expensive.
    @Test func aWaitingConnectionConnectsWhenTheExpensiveMarkIsRemoved() async throws {
        let identity = testServer()
        try await Self.withConnectionWaitingOnAnExpensiveUplink("ipexp1", subnet: 70, server: identity, serving: echo, client: testClient()) {
            connection, _, _, peers in
            #expect(try await UplinkNamespaces.waitingError(connection) == .noAllowedInterface(reason: "expensive paths prohibited (ipexp1 is expensive)"))
            NetworkInterfacePolicy.expensiveInterfaces.remove("ipexp1")
            try await UplinkNamespaces.ready(connection)
            #expect(try await peers.next() == "10.70.0.1")
        }
    }

    /// A required interface that is down: waiting, then ready once it is up.
    @Test func aRequiredInterfaceThatIsDownWaitsForIt() async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addTwoUplinks(client: client, server: server)
            _ = try await client.setLink("ipw2", up: false)
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let peers = PeerLog()
                let (port, serving) = try await UplinkNamespaces.serve(UDP(), in: serverEnvironment, peers: peers) { connection in
                    _ = try await connection.receive()
                }
                defer { serving.cancel() }
                ClientEstablishment.retryDelaysForTesting.withLock { $0[port.rawValue] = [.seconds(3600)] }
                defer { _ = ClientEstablishment.retryDelaysForTesting.withLock { $0.removeValue(forKey: port.rawValue) } }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    let ipw2 = NWInterface(type: .other, name: "ipw2", index: 0)
                    let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: port), using: .parameters { UDP() }.requiredInterface(ipw2))
                    }
                    defer { connection.cancel() }
                    connection.start()
                    #expect(try await UplinkNamespaces.waitingError(connection) == .noAllowedInterface(reason: "requiredInterface ipw2 (down)"))
                    // Down, the kernel flushed its default route: up, it carries the server's
                    // subnet only once the route is back.
                    _ = try await client.setLink("ipw2", up: true)
                    try await client.ip("route", "replace", "default", "via", "10.75.0.2", "dev", "ipw2", "metric", "20")
                    try await UplinkNamespaces.ready(connection)
                    try await connection.send(Data("pinned".utf8))
                    #expect(try await peers.next() == "10.75.0.1")
                }
            }
        }
    }

    /// On Braid's own loops (the process's namespace): traffic to 127.0.0.1 goes through
    /// loopback, which is inexpensive, and which no wired-Ethernet requirement allows.
    @Test func towardLocalhostOnlyLoopbackCounts() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let inexpensive = NetworkConnection(to: server.endpoint, using: .parameters { testClient() }.expensivePathsProhibited(true))
        defer { inexpensive.cancel() }
        let stream = try await inexpensive.openStream()
        try await stream.send(Data("over lo".utf8), endOfStream: true)
        #expect(String(decoding: try await stream.receive(atLeast: 7, atMost: 64).content, as: UTF8.self) == "over lo")

        let wired = NetworkConnection(to: server.endpoint, using: .parameters { testClient() }.requiredInterfaceType(.wiredEthernet))
        defer { wired.cancel() }
        wired.start()
        #expect(try await UplinkNamespaces.waitingError(wired) == .noAllowedInterface(reason: "requiredInterfaceType wiredEthernet (lo is loopback)"))
    }

    @Test func interfaceParametersNeedTheKernelsInterfaces() async throws {
        // A virtual loop has no interfaces to choose from: a clear error, not a silent ignore.
        let loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
        let network = MemoryNetwork(loop: loop, delay: .milliseconds(1))
        let connection = NetworkEnvironment.$current.withValue(network.environment) {
            NetworkConnection(to: .hostPort(host: "10.0.0.1", port: 9), using: .parameters { UDP() }.constrainedPathsProhibited(true))
        }
        connection.start()
        let state = try await loop.drive {
            for await state in connection.states where state.isFinal { return state }
            return connection.state
        }
        guard case .failed(.unsupported(let what)) = state else {
            Issue.record("\(state)")
            return
        }
        #expect(what.contains("cannot watch the kernel's interfaces"))

        // Listeners take only requiredInterface.
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any), using: .parameters { UDP() }.requiredInterfaceType(.wiredEthernet))
        do {
            try await listener.run { _ in }
            Issue.record("a listener ran with requiredInterfaceType")
        } catch NetworkError.unsupported(let what) {
            #expect(what.contains("requiredInterfaceType"))
        }
    }
}
