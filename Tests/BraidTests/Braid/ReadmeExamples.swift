import BraidCore
import BraidIO
import BraidPerf
import Dispatch
import Foundation
import Glibc
import HTTPTypes
import Testing

@testable import Braid

// The README's examples and many of the DocC articles' (tools/check-doc-examples.py checks that
// each is here, or in Tests/BraidTests/Docs/ArticleExamples.swift, verbatim apart from
// indentation), so they compile with every build; most run against each other here.

/// README: a server.
func readmeServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        QUIC(alpn: ["echo"]).identity(certificateChainFile: certificate, privateKeyFile: key)
    }
    try await listener.run { connection in
        try await connection.inboundStreams { stream in
            let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
            try await stream.send(request, endOfStream: true)
        }
    }
}

/// README (HTTP/3): the server.
func readmeHTTP3Server(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        QUIC(alpn: ["h3"]).identity(certificateChainFile: certificate, privateKeyFile: key)
    }
    try await listener.runHTTP3 { request, body in
        let received = try await body.collect(upTo: 1024 * 1024)
        return (HTTPResponse(status: .ok), .data(Data("got \(received.count) bytes".utf8)))
    }
}

/// README (HTTP/3): the client.
func readmeHTTP3Client(port: NWEndpoint.Port, caFile: String) async throws -> (Data, HTTPResponse) {
    let client = HTTP3Client(quic: QUIC(alpn: ["h3"]).trust(.certificateAuthorities(file: caFile)))
    let request = HTTPRequest(method: .get, scheme: "https", authority: "localhost:\(port)", path: "/index.html")
    let (body, response) = try await client.data(for: request)
    print(response.status, body.count)
    client.close()
    return (body, response)
}

/// README: a client with one stream.
func readmeClient(port: NWEndpoint.Port, caFile: String) async throws -> String {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
        QUIC(alpn: ["echo"]).trust(.certificateAuthorities(file: caFile))
    }
    defer { connection.cancel() }
    let stream = try await connection.openStream()
    try await stream.send(Data("hello".utf8), endOfStream: true)
    let (reply, _) = try await stream.receive(atLeast: 1, atMost: 1024)
    return String(decoding: reply, as: UTF8.self)
}

/// README: a graceful shutdown of a listener.
func readmeGracefulShutdown(listener: NetworkListener<QUIC>, shutdownRequested: () async -> Void) async throws {
    let serving = Task {
        try await listener.run { connection in
            try await connection.inboundStreams { stream in
                let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
                try await stream.send(request, endOfStream: true)
            }
        }
    }
    await shutdownRequested()  // e.g. SIGTERM arrived
    serving.cancel()           // stop accepting; every connection closes with code 0
    try await serving.value    // returns once every close is on the wire
}

/// README (DTLS): a client.
func readmeDTLSClient() async throws -> Data {
    let sensor = NetworkConnection(to: .hostPort(host: "sensor.example.com", port: 5684)) {
        DTLS { UDP() }.alpn(["coap"])
    }
    try await sensor.send(Data("reading".utf8))
    let (reply, _) = try await sensor.receive()
    return reply
}

/// README (DTLS): an echo listener.
func readmeDTLSListener() async throws {
    let listener = NetworkListener(port: 5684) {
        DTLS { UDP() }.peerAuthentication(.none)
            .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
    }
    try await listener.run { connection in
        for try await (content, _) in connection.messages { try await connection.send(content) }
    }
}

/// README (DTLS): a classic listener presenting an imported identity.
func dtlsListener(identity: SecIdentity) throws -> NWListener {
    let dtls = NWProtocolTLS.Options()
    sec_protocol_options_set_local_identity(dtls.securityProtocolOptions, sec_identity_create(identity)!)
    return try NWListener(using: NWParameters(dtls: dtls), on: 5684)
}

/// README: datagrams.
func readmeDatagrams(_ connection: NetworkConnection<QUIC>) async throws -> Data? {
    try await connection.datagrams.send(Data([1, 2, 3]))
    for await datagram in connection.datagrams {
        return datagram
    }
    return nil
}

/// README: a path monitor for policy and UI.
func readmeMonitorUpdates() -> NWPathMonitor {
    let monitor = NWPathMonitor(prohibitedInterfaceTypes: [.cellular])
    monitor.pathUpdateHandler = { path in
        print(path.status == .satisfied ? "online" : "offline: \(path.unsatisfiedDescription ?? "")")
    }
    monitor.start(queue: DispatchQueue(label: "paths"))
    return monitor
}

/// README: waiting for a usable path with `for await`.
func readmeConnectivity(_ monitor: NWPathMonitor) async -> String {
    for await path in monitor where path.status == .satisfied {
        let interface = path.availableInterfaces[0]
        return "online over \(interface.name) (\(interface.type)), expensive: \(path.isExpensive)"
    }
    return "monitor cancelled"
}

/// README: interface parameters, reacting to `waiting`.
func readmeInterfaceParameters() async {
    let connection = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
        QUIC(alpn: ["h3"])
    }.expensivePathsProhibited(true))
    for await state in connection.states {
        if case .waiting(let error) = state { print("waiting: \(error)") }
        if state == .ready { break }
    }
    connection.cancel()
}

/// README: marking interfaces.
func readmeMarkInterfaces() {
    NetworkInterfacePolicy.expensiveInterfaces = ["eth1", "usb*"]
    NetworkInterfacePolicy.constrainedInterfaces.insert("wlan1")
}

/// README: a TLS server that answers each 13-byte greeting with 98 bytes.
func readmeTLSServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        TLS().identity(certificateChainFile: certificate, privateKeyFile: key)
    }
    try await listener.run { connection in
        let greeting = try await connection.receive(exactly: 13).content
        try await connection.send(greeting + Data(repeating: 0x2E, count: 85))
    }
}

/// README: Network.framework's first example, unchanged.
func readmeTLSClient(port: NWEndpoint.Port) async throws -> Data {
    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: port)) {
        TLS() // TCP and IP inferred
    }
    try await connection.send(Data("Hello, world!".utf8))
    let incoming = try await connection.receive(exactly: 98).content
    return incoming
}

/// README: the nested stack, and states instead of a reachability check.
func readmeTLSStates(port: NWEndpoint.Port) async -> [NetworkConnectionState] {
    var seen: [NetworkConnectionState] = []
    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: port)) {
        TLS { TCP { IP().fragmentationEnabled(false) } }
    }
    connection.start()  // or the first send or receive
    for await state in connection.states {
        if case .waiting(let error) = state { print("Waiting: \(error)") }  // Braid retries by itself
        if case .ready = state { break }
        seen.append(state)
    }
    return seen
}

/// README (porting): the classic API's client.
func readmeClassicClient(port: NWEndpoint.Port) -> NWConnection {
    let connection = NWConnection(host: "localhost", port: port, using: .tcp)
    let queue = DispatchQueue(label: "client")
    connection.stateUpdateHandler = { state in
        switch state {
        case .ready: print("connected")
        case .waiting(let error): print("waiting: \(error)")
        case .failed(let error): print("failed: \(error)")
        default: break
        }
    }
    connection.start(queue: queue)
    connection.send(content: Data("hello".utf8), completion: .contentProcessed { error in
        if let error { print("send failed: \(error)") }
    })
    connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, error in
        print("received \(content?.count ?? 0) bytes", isComplete ? "(end)" : "")
    }
    return connection
}

/// README (porting): a verify block pinning the server's key.
func readmePinnedClient(port: NWEndpoint.Port, loadPinnedKey: () -> Data) -> NWConnection {
    let pinnedKey: Data = loadPinnedKey()
    let tls = NWProtocolTLS.Options()
    sec_protocol_options_set_verify_block(tls.securityProtocolOptions, { metadata, trust, complete in
        let trust = sec_trust_copy_ref(trust).takeRetainedValue()
        guard let key = SecTrustCopyKey(trust),
              let presented = SecKeyCopyExternalRepresentation(key, nil) as Data? else {
            complete(false)
            return
        }
        complete(presented == pinnedKey)
    }, DispatchQueue(label: "verify"))
    let connection = NWConnection(host: "localhost", port: port, using: NWParameters(tls: tls))
    return connection
}

/// README: the Coder example's message type.
enum GameMessage: Codable, Sendable, Equatable {
    case selectedCharacter(String)
    case move(row: Int, column: Int)
}

/// README: Network.framework's TLV game example.
func readmeTLVGame(port: NWEndpoint.Port) async throws -> (String, Int) {
    enum GameMessage: Int {
        case selectedCharacter = 0
        case move = 1
    }

    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: port)) {
        TLV {
            TLS()
        }
    }

    // Send a message
    let characterData = Data("🐨".utf8)
    try await connection.send(characterData, type: GameMessage.selectedCharacter.rawValue)

    // Receive a message
    let (incomingData, metadata) = try await connection.receive()
    switch GameMessage(rawValue: metadata.type) {
    case .selectedCharacter:
        let character = String(data: incomingData, encoding: .utf8)
        print("Character selected: \(character ?? "")")
    case .move:
        print("Move: \(incomingData.count) bytes")
    case .none:
        print("Unknown message type \(metadata.type)")
    }
    connection.cancel()
    return (String(decoding: incomingData, as: UTF8.self), metadata.type)
}

/// README: Network.framework's Coder example.
func readmeCoderGame(port: NWEndpoint.Port) async throws -> GameMessage {
    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: port)) {
        Coder(GameMessage.self, using: .json) { TLS() }
    }
    try await connection.send(.selectedCharacter("🐨"))
    let gameMessage = try await connection.receive().content
    switch gameMessage {
    case .selectedCharacter(let character): print("Character selected: \(character)")
    case .move(let row, let column): print("Move: (\(row), \(column))")
    }
    connection.cancel()
    return gameMessage
}

/// README: a TLV echo server (the Coder client's messages are TLV messages of type 0).
func readmeTLVServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        TLV { TLS().identity(certificateChainFile: certificate, privateKeyFile: key) }
    }
    try await listener.run { connection in
        for try await (content, metadata) in connection.messages {
            try await connection.send(content, type: metadata.type)
        }
    }
}

/// README: a WebSocket client.
func readmeWebSocketClient(port: NWEndpoint.Port) async throws -> (String, NWProtocolWebSocket.Opcode) {
    let socket = NetworkConnection(to: .url(URL(string: "wss://www.example.com:\(port)/chat")!)) {
        WebSocket { TLS() }.subprotocols(["chat"])
    }
    try await socket.send("hello")
    let (content, metadata) = try await socket.receive()
    print(metadata.opcode, String(decoding: content, as: UTF8.self))
    try await socket.close(code: .protocolCode(.normalClosure), reason: "done")
    socket.cancel()
    return (String(decoding: content, as: UTF8.self), metadata.opcode)
}

/// README: what the WebSocket upgrade agreed.
func readmeWebSocketAgreement(port: NWEndpoint.Port) async throws -> (String?, String?) {
    let chat = NetworkConnection(to: .url(URL(string: "wss://www.example.com:\(port)/chat")!)) {
        WebSocket { TLS() }.subprotocols(["chat.v2", "chat"]).perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate())
    }
    try await chat.send("hello")
    _ = try await chat.receive()
    print(chat.selectedSubprotocol ?? "none", chat.negotiatedExtensions ?? "uncompressed")
    chat.cancel()
    return (chat.selectedSubprotocol, chat.negotiatedExtensions)
}

/// README: a WebSocket echo server.
func readmeWebSocketServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        WebSocket { TLS().identity(certificateChainFile: certificate, privateKeyFile: key) }.subprotocols(["chat"])
    }
    try await listener.run { connection in
        for try await (content, metadata) in connection.messages {
            switch metadata.opcode {
            case .text: try await connection.send(String(decoding: content, as: UTF8.self))
            case .binary: try await connection.send(content)
            case .ping: try await connection.pong(content)
            default: break
            }
        }
    }
}

/// README: Coder on a QUIC stream, the client.
func readmeQUICStreamCoderClient(port: NWEndpoint.Port, caFile: String) async throws -> GameMessage {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
        QUIC(alpn: ["game"]).trust(.certificateAuthorities(file: caFile))
    }
    defer { connection.cancel() }
    let stream = try await connection.openStream { quicStream in
        Coder(GameMessage.self, using: .json) { quicStream }
    }
    try await stream.send(.move(row: 1, column: 2))
    let reply = try await stream.receive().content
    return reply
}

/// README: Coder on QUIC streams, the server.
func readmeQUICStreamCoderServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        QUIC(alpn: ["game"]).identity(certificateChainFile: certificate, privateKeyFile: key)
    }
    try await listener.run { connection in
        try await connection.inboundStreams(prepending: { quicStream in
            Coder(GameMessage.self, using: .json) { quicStream }
        }) { stream in
            for try await (message, _) in stream.messages {
                try await stream.send(message)
            }
        }
    }
}

/// README: Network.framework's UDP game example.
func readmeUDPGame(port: NWEndpoint.Port) async throws -> Data {
    let game = NetworkConnection(to: .hostPort(host: "game-server.example.com", port: port)) { UDP() }
    try await game.send(Data("player_position:100,50".utf8))
    let (data, _) = try await game.receive()
    game.cancel()
    return data
}

/// README: a UDP echo server.
func readmeUDPEchoServer(port: NWEndpoint.Port) async throws {
    let listener = NetworkListener(port: port) { UDP() }
    try await listener.run { connection in
        for try await (content, _) in connection.messages {
            try await connection.send(content)
        }
    }
}

/// README: Coder over UDP, the client.
func readmeCoderUDPClient(port: NWEndpoint.Port) async throws -> GameMessage {
    let position = NetworkConnection(to: .hostPort(host: "game-server.example.com", port: port)) {
        Coder(GameMessage.self, using: .json) { UDP() }
    }
    try await position.send(.move(row: 1, column: 2))
    let update = try await position.receive().content
    position.cancel()
    return update
}

/// README: Coder over UDP, the server.
func readmeCoderUDPServer(port: NWEndpoint.Port) async throws {
    let listener = NetworkListener(port: port) { Coder(GameMessage.self, using: .json) { UDP() } }
    try await listener.run { connection in
        for try await (message, _) in connection.messages {
            try await connection.send(message)
        }
    }
}

@Suite(.serialized) struct ReadmeExamples {
    @Test(.timeLimit(.minutes(5))) func clientAndServerExamplesTalk() async throws {
        // The server example listens on every address of a fixed port: one below the ephemeral
        // range, so no client socket of another test takes it, and the client is asked again
        // until a deadline while the example binds.
        let port = try NWEndpoint.Port(rawValue: freePort(.udp))!
        let server = Task {
            try await readmeServer(port: port, certificate: Fixtures.path("server.pem"), key: Fixtures.path("server-key.pem"))
        }
        defer { server.cancel() }
        let reply = try await Self.firstAnswer { try await readmeClient(port: port, caFile: Fixtures.caFile) }
        #expect(reply == "hello")

        let echoServer = try await RunningListener.start()
        defer { echoServer.task.cancel() }
        let connection = NetworkConnection(to: echoServer.endpoint) { testClient() }
        defer { connection.cancel() }
        #expect(try await readmeDatagrams(connection) == Data([1, 2, 3]))
    }

    /// The graceful-shutdown example: a client in the middle of a connection sees the
    /// listener's close with code 0 once the example's `serving.value` has returned.
    /// The README's HTTP/3 server and client talk. The server gets a port below the ephemeral
    /// range (no client socket of another test can take it), and the client is asked again
    /// until a deadline while the server binds; the time limit turns a stuck request into a
    /// failure instead of a wedged run.
    @Test(.timeLimit(.minutes(5))) func http3ExamplesTalk() async throws {
        let port = try NWEndpoint.Port(rawValue: freePort(.udp))!
        let server = Task {
            try await readmeHTTP3Server(port: port, certificate: Fixtures.path("server.pem"), key: Fixtures.path("server-key.pem"))
        }
        defer { server.cancel() }
        let (body, response) = try await Self.firstAnswer { try await readmeHTTP3Client(port: port, caFile: Fixtures.caFile) }
        #expect(response.status == .ok)
        #expect(String(decoding: body, as: UTF8.self) == "got 0 bytes")
    }

    @Test func gracefulShutdownExampleClosesClientsWithCodeZero() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            QUIC(alpn: ["echo"]).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let (requests, requestShutdown) = AsyncStream<Void>.makeStream()
        let server = Task {
            try await readmeGracefulShutdown(listener: listener) {
                for await _ in requests { return }
            }
        }
        defer { server.cancel() }
        for await state in listener.states where state == .ready { break }
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: try #require(listener.port))) {
            testClient().idleTimeout(120_000)
        }
        defer { connection.cancel() }
        let stream = try await connection.openStream()
        try await stream.send(Data("ping".utf8), endOfStream: true)
        #expect(try await stream.receive(atLeast: 4, atMost: 4).content == Data("ping".utf8))
        // A second stream keeps the handler busy while the shutdown comes.
        let waiting = try await connection.openStream()
        try await waiting.send(Data("x".utf8), endOfStream: false)

        requestShutdown.yield()
        try await server.value
        #expect(listener.state == .cancelled)
        let deadline = ContinuousClock.now + .seconds(60)
        while !connection.state.isFinal && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if case .failed(.peerClosed(code: 0, _)) = connection.state {} else {
            Issue.record("the client's connection is \(connection.state), not closed by the listener with code 0")
        }
    }

    /// The TLS examples run unchanged against the README's TLS server: www.example.com
    /// resolves to this machine, the test CA stands in for the system store, and the first
    /// connect finds no route once, so the states example sees `waiting` before `ready`.
    @Test func tlsExamplesRunUnchangedAgainstABraidListener() async throws {
        try await withExampleServer(readmeTLSServer) { port in
            let incoming = try await Self.firstAnswer { try await readmeTLSClient(port: port) }
            #expect(incoming == Data("Hello, world!".utf8) + Data(repeating: 0x2E, count: 85))

            ClientEstablishment.routeFailuresForTesting.withLock { $0[port.rawValue] = (ENETUNREACH, 1) }
            defer { _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port.rawValue) } }
            let unreachable = NetworkConnectionState.waiting(.system(call: "connect(127.0.0.1:\(port))", errno: ENETUNREACH))
            // The loop subscribes after `start()`, so what it sees first depends on timing; the
            // waiting state, the retry and the break at ready do not.
            let seen = await readmeTLSStates(port: port)
            #expect(seen.contains(unreachable))
            #expect(seen.last == .preparing)
        }
    }

    /// Network.framework's TLV and Coder game examples run unchanged against the README's
    /// TLV server (www.example.com resolves to this machine, the test CA stands in for the
    /// system store).
    @Test func tlvAndCoderGameExamplesRunUnchanged() async throws {
        try await withExampleServer(readmeTLVServer) { port in
            let echoed = try await Self.firstAnswer { try await readmeTLVGame(port: port) }
            #expect(echoed.0 == "🐨")
            #expect(echoed.1 == 0)
            #expect(try await readmeCoderGame(port: port) == .selectedCharacter("🐨"))
        }
    }

    /// The README's WebSocket client and server talk (www.example.com resolves to this
    /// machine, the test CA stands in for the system store).
    @Test func webSocketExamplesTalk() async throws {
        try await withExampleServer(readmeWebSocketServer) { port in
            let echoed = try await Self.firstAnswer { try await readmeWebSocketClient(port: port) }
            #expect(echoed.0 == "hello")
            #expect(echoed.1 == .text)
            // The server example lists "chat" and compresses nothing: the client offered both.
            let agreed = try await Self.firstAnswer { try await readmeWebSocketAgreement(port: port) }
            #expect(agreed.0 == "chat")
            #expect(agreed.1 == nil)
        }
    }

    /// The Coder-on-QUIC-streams examples talk: the client's value comes back from the
    /// server's inbound stream.
    @Test(.timeLimit(.minutes(3))) func coderOnQUICStreamExamplesTalk() async throws {
        // The server example listens on every address of a fixed port; pick a free one first.
        let probe = try await RunningListener.start(alpn: ["game"], handler: { _ in })
        let port = try #require(probe.listener.port)
        probe.task.cancel()
        _ = try? await probe.task.value
        let server = Task {
            try await readmeQUICStreamCoderServer(
                port: port, certificate: Fixtures.path("server.pem"), key: Fixtures.path("server-key.pem"))
        }
        defer { server.cancel() }
        let reply = try await Self.firstAnswer { try await readmeQUICStreamCoderClient(port: port, caFile: Fixtures.caFile) }
        #expect(reply == .move(row: 1, column: 2))
    }

    /// Runs a README server on a free port with www.example.com resolving to this machine
    /// and the test CA standing in for the system store, then `body` with the port.
    private func withExampleServer(
        _ server: @escaping @Sendable (NWEndpoint.Port, String, String) async throws -> Void,
        _ body: (NWEndpoint.Port) async throws -> Void
    ) async throws {
        let port = try NWEndpoint.Port(rawValue: freePort(.tcp))!
        let running = Task { try await server(port, Fixtures.path("example.pem"), Fixtures.path("example-key.pem")) }
        defer { running.cancel() }
        Resolver.namesForTesting.withLock { $0["www.example.com"] = [SocketAddress(ip: "127.0.0.1", port: port.rawValue)!] }
        TLS.systemTrustForTesting.withLock { $0 = Fixtures.caFile }
        defer {
            _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: "www.example.com") }
            TLS.systemTrustForTesting.withLock { $0 = nil }
        }
        try await body(port)
    }

    /// The first answer of `exchange`, retried while the listener is still binding.
    /// The listener's task may take seconds to bind on a loaded machine (a full suite on two
    /// cores), so the retries go on until a generous deadline, not for a count.
    private static func firstAnswer<T>(_ exchange: () async throws -> T) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let answer = try? await exchange() { return answer }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await exchange()
    }

    /// Network.framework's UDP example runs unchanged against the README's UDP echo server
    /// (game-server.example.com resolves to this machine).
    @Test(.timeLimit(.minutes(3))) func udpGameExampleRunsUnchanged() async throws {
        let echoed = try await Self.udpExchange(server: readmeUDPEchoServer, client: readmeUDPGame)
        #expect(echoed == Data("player_position:100,50".utf8))
    }

    /// The classic-API client example connects and its greeting reaches the server.
    @Test(.timeLimit(.minutes(3))) func classicClientExampleRuns() async throws {
        let greetings = AsyncStream<Data>.makeStream()
        let server = try await RunningStreamListener.start(TCP(), handler: { connection in
            greetings.continuation.yield(try await connection.receive(exactly: 5).content)
            try await connection.send(Data("welcome".utf8), endOfStream: true)
        })
        defer { server.task.cancel() }
        let connection = readmeClassicClient(port: server.port)
        defer { connection.cancel() }
        var greeting: Data?
        for await received in greetings.stream {
            greeting = received
            break
        }
        #expect(greeting == Data("hello".utf8))
        #expect(connection.state == .ready)
    }

    /// The pinning example reaches a server whose authority nobody trusts when the pin is the
    /// server's key, and is refused when it is another's.
    @Test(.timeLimit(.minutes(3))) func pinningExampleAcceptsItsKeyAndRefusesAnother() async throws {
        let server = try await RunningStreamListener.start(
            TLS().identity(certificateChainFile: Fixtures.path("untrusted.pem"), privateKeyFile: Fixtures.path("untrusted-key.pem")))
        defer { server.task.cancel() }
        func key(of name: String) throws -> Data {
            let certificate = try #require(SecCertificateCreateWithData(nil, try Fixtures.der(name) as CFData))
            return try #require(SecCertificateCopyKey(certificate).flatMap { SecKeyCopyExternalRepresentation($0, nil) } as Data?)
        }
        for (pin, accepted) in [(try key(of: "untrusted.pem"), true), (try key(of: "server.pem"), false)] {
            let connection = readmePinnedClient(port: server.port) { pin }
            defer { connection.cancel() }
            let states = StateRecorder(connection)
            connection.start(queue: DispatchQueue(label: "pinned"))
            let outcome = try await states.wait(for: "ready or failed") { $0 == .ready || $0 == .failed(.tls(-9808)) }
            #expect(outcome == (accepted ? .ready : .failed(.tls(-9808))))
        }
    }

    /// The Coder-over-UDP examples talk: the client's value comes back from the server.
    @Test(.timeLimit(.minutes(3))) func coderOverUDPExamplesTalk() async throws {
        let echoed = try await Self.udpExchange(server: readmeCoderUDPServer, client: readmeCoderUDPClient)
        #expect(echoed == .move(row: 1, column: 2))
    }

    /// Runs a README UDP server on a port below the ephemeral range, with
    /// game-server.example.com resolving to this machine, and returns the README client's
    /// first answer: each try waits 200 ms (UDP drops what reaches no socket yet), until a
    /// generous deadline.
    private static func udpExchange<Answer: Sendable>(
        server: @escaping @Sendable (NWEndpoint.Port) async throws -> Void,
        client: @escaping @Sendable (NWEndpoint.Port) async throws -> Answer
    ) async throws -> Answer? {
        let port = try NWEndpoint.Port(rawValue: freePort(.udp))!
        let running = Task { try await server(port) }
        defer { running.cancel() }
        Resolver.namesForTesting.withLock { $0["game-server.example.com"] = [SocketAddress(ip: "127.0.0.1", port: port.rawValue)!] }
        defer { _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: "game-server.example.com") } }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let answer = try? await withThrowingTaskGroup(of: Answer?.self) { group in
                group.addTask { try await client(port) }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(200))
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            if let answer { return answer }
        }
        return nil
    }
}

/// README (custom framers): the framer.
final class GameProtocol: NWProtocolFramerImplementation, FramerProtocol {
    static let label = "TicTacToe"
    static let definition = NWProtocolFramer.Definition(implementation: GameProtocol.self)

    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        var header = Data()
        withUnsafeBytes(of: (message["type"] as? UInt32 ?? 0).bigEndian) { header.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(messageLength).bigEndian) { header.append(contentsOf: $0) }
        framer.writeOutput(data: header)
        try? framer.writeOutputNoCopy(length: messageLength)
    }

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var header: (type: UInt32, length: UInt32)?
            let parsed = framer.parseInput(minimumIncompleteLength: 8, maximumLength: 8) { buffer, _ in
                guard let buffer, buffer.count == 8 else { return 0 }
                header = (UInt32(bigEndian: buffer.loadUnaligned(as: UInt32.self)),
                          UInt32(bigEndian: buffer.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
                return 8
            }
            guard parsed, let header else { return 8 }
            let message = NWProtocolFramer.Message(instance: framer)
            message["type"] = header.type
            if !framer.deliverInputNoCopy(length: Int(header.length), message: message, isComplete: true) { return 0 }
        }
    }
}

/// README (custom framers): a new-API client.
func readmeFramerClient(port: NWEndpoint.Port) async throws -> (UInt32, String) {
    let game = NetworkConnection(to: .hostPort(host: "www.example.com", port: port)) {
        Framer<GameProtocol> { TLS() }
    }
    let move = NWProtocolFramer.Message(definition: GameProtocol.definition)
    move["type"] = UInt32(2)
    try await game.send(Data("e2e4".utf8), metadata: move)
    let (content, metadata) = try await game.receive()
    print(metadata.framer["type"] as? UInt32 ?? 0, String(decoding: content, as: UTF8.self))
    game.cancel()
    return (metadata.framer["type"] as? UInt32 ?? 0, String(decoding: content, as: UTF8.self))
}

/// README (custom framers): a new-API echo server.
func readmeFramerServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        Framer<GameProtocol> { TLS().identity(certificateChainFile: certificate, privateKeyFile: key) }
    }
    try await listener.run { connection in
        while true {
            let (content, metadata) = try await connection.receive()
            try await connection.send(content, metadata: metadata.framer)
        }
    }
}

/// README (custom framers): a classic client.
func readmeFramerClassicClient(port: NWEndpoint.Port) -> NWConnection {
    let parameters = NWParameters.tls
    parameters.defaultProtocolStack.applicationProtocols.insert(NWProtocolFramer.Options(definition: GameProtocol.definition), at: 0)
    let connection = NWConnection(host: "www.example.com", port: port, using: parameters)
    connection.start(queue: DispatchQueue(label: "game"))
    let move = NWProtocolFramer.Message(definition: GameProtocol.definition)
    move["type"] = UInt32(2)
    let context = NWConnection.ContentContext(identifier: "move", metadata: [move])
    connection.send(content: Data("e2e4".utf8), contentContext: context, isComplete: true, completion: .idempotent)
    connection.receiveMessage { content, context, _, error in
        let message = context?.protocolMetadata(definition: GameProtocol.definition) as? NWProtocolFramer.Message
        print(message?["type"] as? UInt32 ?? 0, content?.count ?? 0)
    }
    return connection
}

extension ReadmeExamples {
    /// The README's custom-framer client and server talk over TLS (www.example.com resolves to
    /// this machine, the test CA stands in for the system store).
    @Test(.timeLimit(.minutes(3))) func framerExamplesTalk() async throws {
        try await withExampleServer(readmeFramerServer) { port in
            let echoed = try await Self.firstAnswer { try await readmeFramerClient(port: port) }
            #expect(echoed.0 == 2)
            #expect(echoed.1 == "e2e4")
        }
    }

    /// The README's classic framer client reaches a framer listener, its message's type with it.
    @Test(.timeLimit(.minutes(3))) func framerClassicClientExampleRuns() async throws {
        let moves = AsyncStream<(UInt32, Data)>.makeStream()
        let server = try await RunningFramedListener.start(
            Framer<GameProtocol> { TLS().identity(certificateChainFile: Fixtures.path("example.pem"), privateKeyFile: Fixtures.path("example-key.pem")) },
            handler: { connection in
                let (content, metadata) = try await connection.receive()
                moves.continuation.yield((metadata.framer["type"] as? UInt32 ?? 0, content))
                try await connection.send(content, metadata: metadata.framer)
            })
        defer { server.task.cancel() }
        let port = try #require(server.listener.port)
        Resolver.namesForTesting.withLock { $0["www.example.com"] = [SocketAddress(ip: "127.0.0.1", port: port.rawValue)!] }
        TLS.systemTrustForTesting.withLock { $0 = Fixtures.caFile }
        defer {
            _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: "www.example.com") }
            TLS.systemTrustForTesting.withLock { $0 = nil }
        }
        let connection = readmeFramerClassicClient(port: port)
        defer { connection.cancel() }
        let move = try await withDeadline(.seconds(60)) {
            for await move in moves.stream { return move }
            return nil
        }
        #expect(move?.0 == 2)
        #expect(move?.1 == Data("e2e4".utf8))
    }
}

/// README "Local-network discovery".
func readmeDiscovery() async throws -> NetworkConnection<TCP> {
    let browser = NetworkBrowser(for: .bonjour(type: "_game._tcp", domain: nil))
    let endpoint = try await browser.run { results in .finish(results.first!.endpoint) }
    let connection = NetworkConnection(to: endpoint) { TCP() }
    return connection
}

// The README's classic-API quick starts: compiled here, not run (they name hosts on the
// internet; the classic client above runs against a Braid listener).

/// README (quick start): a classic QUIC stream.
func readmeClassicQUIC() -> NWConnection {
    let quic = NWConnection(host: "example.com", port: 4433, using: .quic(alpn: ["echo"]))
    quic.start(queue: .main)
    quic.send(content: Data("hello".utf8), contentContext: .finalMessage, isComplete: true, completion: .contentProcessed { _ in })
    quic.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, _ in
        print(content?.count ?? 0, isComplete)
    }
    return quic
}

/// README (quick start): a classic TLS client.
func readmeClassicTLS() -> NWConnection {
    let connection = NWConnection(host: "example.com", port: 443, using: .tls)
    connection.stateUpdateHandler = { state in
        switch state {
        case .ready: print("ready")
        case .waiting(let error): print("waiting: \(error)")
        case .failed(let error): print("failed: \(error)")
        default: break
        }
    }
    connection.start(queue: .main)
    connection.send(content: Data("hello".utf8), completion: .contentProcessed { error in
        if let error { print("send failed: \(error)") }
    })
    connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, error in
        print(content?.count ?? 0, isComplete, error as Any)
    }
    return connection
}

/// README (quick start): a classic DTLS client.
func readmeClassicDTLS() -> NWConnection {
    let tls = NWProtocolTLS.Options()
    sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "coap")
    let connection = NWConnection(host: "sensor.example", port: 5684, using: NWParameters(dtls: tls))
    return connection
}

/// README (quick start): a classic WebSocket client.
func readmeClassicWebSocket() -> NWConnection {
    let parameters = NWParameters.tls
    parameters.defaultProtocolStack.applicationProtocols.insert(NWProtocolWebSocket.Options(), at: 0)
    let socket = NWConnection(to: .url(URL(string: "wss://www.example.com/chat")!), using: parameters)
    socket.start(queue: .main)
    let text = NWConnection.ContentContext(identifier: "text", metadata: [NWProtocolWebSocket.Metadata(opcode: .text)])
    socket.send(content: Data("hello".utf8), contentContext: text, isComplete: true, completion: .idempotent)
    return socket
}

/// README (quick start): a classic browser.
func readmeClassicBrowser() -> NWBrowser {
    let browser = NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp)
    browser.browseResultsChangedHandler = { results, _ in
        print(results.map(\.endpoint))
    }
    browser.start(queue: .main)
    return browser
}
