import BraidCore
import BraidPerf
import Foundation
import Testing

@testable import Braid

/// A forged ICMP "fragmentation needed" against a QUIC listener, in two network namespaces
/// joined by a veth link (MTU 1,500): an off-path attacker names the connection's 5-tuple
/// with a next-hop MTU of 68 (`Tests/Interop/peers/forge_icmp.py`, a raw socket in the
/// client's namespace). The server's kernel takes it (its route to the client caches an MTU
/// of 552, the kernel's floor), but Braid's UDP sockets send with IP_PMTUDISC_PROBE, which
/// ignores that cache, and QUIC's packet size comes from ngtcp2's own probes: the connection
/// goes on with packets as large as before.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ForgedICMPNamespaceTests {
    static let clientAddress = "10.77.0.1"

    @Test func forgedFragmentationNeededDoesNotShrinkPackets() async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addUplink("icmp0", subnet: 77, metric: 10, client: client, server: server)
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let served = Locked<NetworkConnection<QUIC>?>(nil)
                let stack = QUIC(alpn: ["echo"]).testTimeouts().maxDatagramFrameSize(65535)
                    .identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
                let (port, serving) = try await UplinkNamespaces.serve(stack, in: serverEnvironment, peers: PeerLog()) { connection in
                    served.withLock { $0 = connection }
                    try await connection.inboundStreams { stream in
                        let (request, _) = try await stream.receive(exactly: 4)
                        let total = Int(request.reduce(0) { $0 << 8 | UInt32($1) })
                        let chunk = Data(count: 250_000)
                        for index in 0..<(total / chunk.count) { try await stream.send(chunk, endOfStream: index == total / chunk.count - 1) }
                    }
                }
                defer { serving.cancel() }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: port)) {
                            testClient().maxDatagramFrameSize(65535)
                        }
                    }
                    defer { connection.cancel() }
                    let first = try await Self.download(4_000_000, on: connection)
                    let serverConnection = try #require(served.withLock { $0 })
                    let sizeBefore = try #require(serverConnection.usableDatagramFrameSize)
                    guard case .hostPort(_, let clientPort) = serverConnection.endpoint else {
                        Issue.record("the server's connection has no address: \(serverConnection.endpoint)")
                        return
                    }

                    let forged = try ChildProcess(try NetworkNamespace.ipExecutable, [
                        "netns", "exec", client.name, "python3", PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/forge_icmp.py").path,
                        "--to", UplinkNamespaces.service, "--quoted-source", UplinkNamespaces.service, "--quoted-destination", Self.clientAddress,
                        "--source-port", String(port.rawValue), "--destination-port", String(clientPort.rawValue), "--mtu", "68",
                    ])
                    let exit = try await forged.finish(within: 30)
                    #expect(exit.status == 0, "forge_icmp.py: \(forged.output) \(forged.errors)")
                    // The server's kernel took the forgery: its route to the client now caches a
                    // path MTU below QUIC's 1,200-byte minimum.
                    var cached: Int?
                    let deadline = ContinuousClock.now + .seconds(60)
                    while cached == nil, ContinuousClock.now < deadline {
                        cached = try await Self.cachedMTU(toward: Self.clientAddress, in: server)
                        if cached == nil { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    let mtu = try #require(cached, "the server's kernel cached no path MTU toward the client: the forged ICMP was not taken")
                    #expect(mtu < 1200, "cached path MTU \(mtu)")

                    let second = try await Self.download(4_000_000, on: connection)
                    let sizeAfter = try #require(serverConnection.usableDatagramFrameSize)
                    print("forged ICMP (next-hop MTU 68): kernel route cache \(mtu); server datagrams \(first) bytes on average before, \(second) after; usable datagram frame \(sizeBefore) before, \(sizeAfter) after")
                    #expect(second >= 1200, "the server's packets shrank: \(second) bytes on average")
                    #expect(sizeAfter >= sizeBefore, "the server's path MTU shrank: \(sizeBefore) -> \(sizeAfter)")
                    #expect(try await Self.cachedMTU(toward: Self.clientAddress, in: server) == mtu, "the kernel forgot the forged MTU while the test ran")
                }
            }
        }
    }

    /// Downloads `total` bytes on a new stream of `connection`; returns the average size of
    /// the datagrams that carried them (received bytes over datagrams during the download).
    static func download(_ total: Int, on connection: NetworkConnection<QUIC>) async throws -> Int {
        let stream = try await connection.openStream()
        let before = try #require(await connection.statistics)
        try await stream.send(Data([UInt8(total >> 24 & 0xFF), UInt8(total >> 16 & 0xFF), UInt8(total >> 8 & 0xFF), UInt8(total & 0xFF)]))
        var received = 0
        while received < total {
            let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1 << 20)
            received += content.count
            if metadata.isEndOfStream { break }
        }
        #expect(received == total)
        let after = try #require(await connection.statistics)
        return Int((after.bytesReceived - before.bytesReceived) / max(after.packetsReceived - before.packetsReceived, 1))
    }

    /// The path MTU `ip route get` shows cached toward `address` in `namespace`, if any.
    static func cachedMTU(toward address: String, in namespace: NetworkNamespace) async throws -> Int? {
        let child = try ChildProcess(try NetworkNamespace.ipExecutable, ["-n", namespace.name, "route", "get", address])
        _ = try await child.finish(within: 20)
        let words = child.output.split(whereSeparator: \.isWhitespace)
        guard let index = words.firstIndex(of: "mtu") else { return nil }
        let value = words[words.index(after: index)] == "lock" ? words.dropFirst(index + 2).first : words.dropFirst(index + 1).first
        return value.flatMap { Int($0) }
    }
}
