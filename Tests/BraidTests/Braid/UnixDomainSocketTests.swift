import Dispatch
import Foundation
import Glibc
import Testing

@testable import Braid
import BraidIO

/// `NWEndpoint.unix(path:)` over real Unix-domain sockets, in both dialects: each test has a
/// directory of its own for its socket files.
@Suite(.timeLimit(.minutes(3))) struct UnixDomainSocketTests {
    /// A fresh directory under the system's temporary one, removed by `remove()`.
    struct Directory {
        let path: String
        init() throws {
            var template = Array("/tmp/braid-unix-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw NetworkError.system(call: "mkdtemp", errno: errno) }
            path = String(cString: made)
        }
        func file(_ name: String) -> String { "\(path)/\(name)" }
        func remove() { try? FileManager.default.removeItem(atPath: path) }
    }

    static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// Runs `listener` until ready; throws its failure.
    static func start<P: NetworkProtocol>(
        _ listener: NetworkListener<P>, _ handler: @escaping @Sendable (NetworkConnection<P>) async throws -> Void
    ) async throws -> Task<Void, any Error> {
        let task = Task { try await listener.run(handler) }
        for await state in listener.states {
            if state == .ready { break }
            if case .failed(let error) = state {
                task.cancel()
                throw error
            }
        }
        return task
    }

    @Test(arguments: ["tcp", "tls"]) func aStreamEchoesOverAUnixSocket(_ kind: String) async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let endpoint = NWEndpoint.unix(path: directory.file("echo.sock"))
        let peers = EndpointLog()
        @Sendable func echoRecording<P: StreamProtocol>(_ connection: NetworkConnection<P>) async throws {
            peers.append(connection.endpoint)
            try await echoBytes(connection)
        }
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        if kind == "tcp" {
            let task = try await Self.start(NetworkListener(for: endpoint) { TCP().noDelay(true) }, echoRecording)
            defer { task.cancel() }
            let connection = NetworkConnection(to: endpoint) { TCP().noDelay(true) }
            try await sendAll(payload, on: connection)
            #expect(try await receiveAll(connection) == payload)
            #expect(connection.remoteEndpoint == endpoint)
        } else {
            let task = try await Self.start(NetworkListener(for: endpoint) { testTLSServer() }, echoRecording)
            defer { task.cancel() }
            let connection = NetworkConnection(to: endpoint) { testTLSClient() }
            try await sendAll(payload, on: connection)
            #expect(try await receiveAll(connection) == payload)
            #expect(connection.negotiatedALPN == "echo")
        }
        #expect(peers.all == [endpoint])
    }

    @Test func theClassicAPIListensAndConnectsOnAUnixSocket() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let endpoint = NWEndpoint.unix(path: directory.file("classic.sock"))
        let parameters = NWParameters.tcp
        parameters.requiredLocalEndpoint = endpoint
        let server = try ClassicEchoServer(parameters)
        try await server.startListening()
        #expect(server.listener.port == nil)
        #expect(Self.exists(directory.file("classic.sock")))
        let connection = NWConnection(to: endpoint, using: .tcp)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("over a unix socket".utf8), isComplete: false) == nil)
        let echoed = await connection.receiveAsync(minimum: 18)
        #expect(echoed.content == Data("over a unix socket".utf8))

        // Cancelling the listener removes its socket file.
        let (listenerStates, continuation) = AsyncStream<NWListener.State>.makeStream()
        server.listener.stateUpdateHandler = { continuation.yield($0) }
        server.listener.cancel()
        let cancelled = try await withDeadline(.seconds(60)) {
            for await state in listenerStates where state == .cancelled { return true }
            return nil
        }
        #expect(cancelled == true)
        #expect(!Self.exists(directory.file("classic.sock")))
    }

    /// Network.framework's way to give a listener its endpoint: the parameters'
    /// `localEndpoint(_:)`; and `localPort(_:)` for a port on every address.
    @Test func aListenerTakesItsEndpointFromItsParameters() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let endpoint = NWEndpoint.unix(path: directory.file("parameters.sock"))
        let listener = NetworkListener(using: .parameters { TCP() }.localEndpoint(endpoint))
        let task = try await Self.start(listener, echoBytes)
        let connection = NetworkConnection(to: endpoint) { TCP() }
        try await connection.send(Data("by parameters".utf8))
        #expect(try await connection.receive(exactly: 13).content == Data("by parameters".utf8))
        task.cancel()
        _ = await task.result

        let byPort = NetworkListener(using: .parameters { TCP() }.localPort(.any))
        let portTask = try await Self.start(byPort, echoBytes)
        defer { portTask.cancel() }
        let port = try #require(byPort.port)
        for host: NWEndpoint.Host in ["127.0.0.1", "::1"] {
            let client = NetworkConnection(to: .hostPort(host: host, port: port)) { TCP() }
            try await client.send(Data("by port".utf8))
            #expect(try await client.receive(exactly: 7).content == Data("by port".utf8))
        }

        let both = NetworkListener(for: .unix(path: directory.file("other.sock")), using: .parameters { TCP() }.localEndpoint(endpoint))
        await #expect(throws: NetworkError.self) { try await both.run { _ in } }
    }

    /// The classic TLS client over a Unix-domain socket: it checks the server's certificate
    /// against "localhost", the name a Unix-domain peer gets unless the options name another.
    @Test func theClassicTLSClientConnectsOverAUnixSocket() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let endpoint = NWEndpoint.unix(path: directory.file("tls.sock"))
        let task = try await Self.start(NetworkListener(for: endpoint) { testTLSServer() }, echoBytes)
        defer { task.cancel() }
        let connection = NWConnection(to: endpoint, using: NWConnectionTLSTests.parameters(alpn: ["echo"]))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("tls over unix".utf8), context: .finalMessage) == nil)
        let echoed = await connection.receiveMessageAsync()
        #expect(echoed.content == Data("tls over unix".utf8) && echoed.isComplete && echoed.error == nil)
    }

    @Test func aMissingSocketFileFailsWithENOENT() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let connection = NWConnection(to: .unix(path: directory.file("nobody.sock")), using: .tcp)
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        let failed = try await states.wait(for: "failed") { if case .failed = $0 { true } else { false } }
        #expect(failed == .failed(.posix(.ENOENT)))

        let modern = NetworkConnection(to: .unix(path: directory.file("nobody.sock"))) { TCP() }
        await #expect(throws: NetworkError.system(call: "connect(\(directory.file("nobody.sock")))", errno: ENOENT)) {
            try await modern.send(Data("x".utf8))
        }
    }

    @Test func aPathLongerThanSockaddrUnHoldsIsAClearError() async throws {
        let long = "/tmp/" + String(repeating: "d", count: 110) + ".sock"
        let connection = NetworkConnection(to: .unix(path: long)) { TCP() }
        let error = await #expect(throws: NetworkError.self) { try await connection.send(Data("x".utf8)) }
        guard case .invalidConfiguration(let message) = error else {
            Issue.record("expected invalidConfiguration, got \(String(describing: error))")
            return
        }
        #expect(message.contains("at most 107"))
        let listener = NetworkListener(for: .unix(path: long)) { TCP() }
        await #expect(throws: NetworkError.invalidConfiguration(message)) { try await listener.run { _ in } }
    }

    /// A socket file left by a listener that is gone is replaced; one someone listens on, or a
    /// file that is not a socket, is left alone and the listener fails with EADDRINUSE.
    @Test func aStaleSocketFileIsReplacedAndNothingElseIs() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let path = directory.file("stale.sock")
        // A socket file nobody listens on any more.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = try UnixSocketPath(path).withSockAddr { bind(stale, $0, $1) }
        close(stale)
        #expect(bound == 0 && Self.exists(path))
        let first = try await Self.start(NetworkListener(for: .unix(path: path)) { TCP() }, echoBytes)
        defer { first.cancel() }
        let connection = NetworkConnection(to: .unix(path: path)) { TCP() }
        try await connection.send(Data("fresh".utf8))
        #expect(try await connection.receive(exactly: 5).content == Data("fresh".utf8))

        // Someone listens there now: a second listener fails and leaves the file.
        let second = NetworkListener(for: .unix(path: path)) { TCP() }
        await #expect(throws: NetworkError.self) { try await second.run { _ in } }
        #expect(Self.exists(path))

        // A regular file is never removed.
        let regular = directory.file("data.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: regular))
        let third = NetworkListener(for: .unix(path: regular)) { TCP() }
        await #expect(throws: NetworkError.system(
            call: "bind(\(regular)): a file that is not a socket is there (Braid never removes one)", errno: EADDRINUSE)) {
            try await third.run { _ in }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: regular)) == Data("keep me".utf8))
    }

    /// `UDP()` to a datagram server's socket file, in both dialects: datagrams go out whole,
    /// the server's answers come back, named by the socket file.
    @Test func udpDatagramsEchoOverAUnixSocket() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let peer = try UnixDatagramEchoPeer(path: directory.file("echo.dgram"))
        defer { peer.stop() }
        let endpoint = NWEndpoint.unix(path: peer.path)

        let connection = NetworkConnection(to: endpoint) { UDP() }
        defer { connection.cancel() }
        // A Unix-domain datagram socket neither drops nor reorders: one send, one answer each.
        for size in [1, 1200, 60_000] {
            let message = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &+ size) })
            try await connection.send(message)
            let (echoed, metadata) = try await connection.receive()
            #expect(echoed == message)
            #expect(metadata.remoteEndpoint == endpoint)
        }
        #expect(connection.remoteEndpoint == endpoint)

        let classic = NWConnection(to: endpoint, using: .udp)
        defer { classic.cancel() }
        classic.start(queue: DispatchQueue(label: "client"))
        #expect(await classic.sendAsync(Data("classic datagram".utf8)) == nil)
        let reply = await classic.receiveMessageAsync()
        #expect(reply.content == Data("classic datagram".utf8) && reply.isComplete && reply.error == nil)
    }

    /// A UDP listener on a socket file, in both dialects: each sender is a connection of its
    /// own (a Braid client's autobound name, or a path a plain socket bound), answered where
    /// it sent from; the file goes when the listener stops.
    @Test func aUDPListenerServesSendersOverAUnixSocket() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let endpoint = NWEndpoint.unix(path: directory.file("server.dgram"))
        let peers = EndpointLog()
        let task = try await Self.start(NetworkListener(for: endpoint) { UDP() }) { connection in
            peers.append(connection.endpoint)
            for try await (content, _) in connection.messages { try await connection.send(content) }
        }
        for index in 0..<3 {
            let client = NetworkConnection(to: endpoint) { UDP() }
            let message = Data("client \(index)".utf8)
            try await client.send(message)
            #expect(try await client.receive().content == message)
            client.cancel()
        }
        #expect(peers.all == Array(repeating: endpoint, count: 3))

        // A plain socket bound to a path of its own.
        let own = directory.file("own.dgram")
        let plain = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(plain) }
        #expect(try UnixSocketPath(own).withSockAddr { bind(plain, $0, $1) } == 0)
        let sent = try UnixSocketPath(endpoint.description).withSockAddr { address, length in
            Array("plain".utf8).withUnsafeBytes { sendto(plain, $0.baseAddress, $0.count, 0, address, length) }
        }
        #expect(sent == 5)
        var reply = [UInt8](repeating: 0, count: 16)
        let received = reply.withUnsafeMutableBytes { recv(plain, $0.baseAddress, $0.count, 0) }
        #expect(received == 5 && reply.prefix(5) == Array("plain".utf8)[...])

        task.cancel()
        _ = await task.result
        #expect(!Self.exists(endpoint.description))

        // The classic dialect: NWListener on the socket file, NWConnection to it.
        let parameters = NWParameters.udp
        parameters.requiredLocalEndpoint = endpoint
        let server = try ClassicEchoServer(parameters)
        try await server.startListening()
        defer { server.listener.cancel() }
        let connection = NWConnection(to: endpoint, using: .udp)
        defer { connection.cancel() }
        connection.start(queue: DispatchQueue(label: "client"))
        #expect(await connection.sendAsync(Data("classic".utf8)) == nil)
        let echoed = await connection.receiveMessageAsync()
        #expect(echoed.content == Data("classic".utf8) && echoed.error == nil)
    }

    /// A client that never reads cannot hold a UDP listener's sends: what its full queue has
    /// no room for is dropped, as UDP drops it, and the other clients are served meanwhile.
    @Test func aUDPListenerDropsWhatAClientThatNeverReadsHasNoRoomFor() async throws {
        let directory = try Directory()
        defer { directory.remove() }
        let endpoint = NWEndpoint.unix(path: directory.file("flood.dgram"))
        let (floods, finished) = AsyncStream<Int>.makeStream()
        let task = try await Self.start(NetworkListener(for: endpoint) { UDP() }) { connection in
            for try await (content, _) in connection.messages {
                guard content == Data("flood".utf8) else {
                    try await connection.send(content)
                    continue
                }
                // Far more than the client's queue holds (net.unix.max_dgram_qlen, 10 by default).
                for _ in 0..<2_000 { try await connection.send(Data(repeating: 7, count: 1000)) }
                finished.yield(2_000)
            }
        }
        defer { task.cancel() }
        // A plain socket bound to a path of its own, which never reads.
        let deaf = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(deaf) }
        #expect(try UnixSocketPath(directory.file("deaf.dgram")).withSockAddr { bind(deaf, $0, $1) } == 0)
        let sent = try UnixSocketPath(endpoint.description).withSockAddr { address, length in
            Array("flood".utf8).withUnsafeBytes { sendto(deaf, $0.baseAddress, $0.count, 0, address, length) }
        }
        #expect(sent == 5)
        let flooded = try await withDeadline(.seconds(60)) {
            for await count in floods { return count }
            return nil
        }
        #expect(flooded == 2_000)
        let other = NetworkConnection(to: endpoint) { UDP() }
        defer { other.cancel() }
        try await other.send(Data("still served".utf8))
        #expect(try await other.receive().content == Data("still served".utf8))
    }

    @Test func quicSaysItDoesNotRunOverUnixSockets() async throws {
        let quic = NetworkConnection(to: .unix(path: "/tmp/braid-nowhere.sock")) { testClient() }
        let error = await #expect(throws: NetworkError.self) { _ = try await quic.openStream() }
        if case .unsupported = error {} else { Issue.record("expected unsupported, got \(String(describing: error))") }
        let quicListener = NetworkListener(for: .unix(path: "/tmp/braid-nowhere.sock")) {
            testServer()
        }
        let listenerError = await #expect(throws: NetworkError.self) { try await quicListener.run { _ in } }
        if case .unsupported = listenerError {} else { Issue.record("expected unsupported, got \(String(describing: listenerError))") }
    }
}
