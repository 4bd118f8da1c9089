import Braid
import BraidIO
import BraidQUIC
import Foundation
import HTTPTypes

// Every ```swift example in the articles of Sources/Braid/Braid.docc, pasted verbatim (only the
// indentation differs) so it compiles with every build; tools/check-doc-examples.py fails when
// an example is missing here or differs. Names an example uses without defining come in as
// parameters; lines after an example only return what it defines, so the build has no
// unused-value warnings. These are compiled, not run: the README's examples, which they repeat
// in part, run in ReadmeExamples.

// MARK: Braid.md and GettingStarted.md

func articleExample_tlsHello() async throws -> Data {
    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) {
        TLS() // TCP and IP inferred
    }
    try await connection.send(Data("Hello, world!".utf8))
    let incoming = try await connection.receive(exactly: 98).content
    return incoming
}

func articleExample_quicServer() async throws {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["echo"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    try await listener.run { connection in
        try await connection.inboundStreams { stream in
            let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
            try await stream.send(request, endOfStream: true)
        }
    }
}

func articleExample_quicClient() async throws -> Data {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 4433)) {
        QUIC(alpn: ["echo"]).trust(.certificateAuthorities(file: "ca.pem"))
    }
    defer { connection.cancel() }
    let stream = try await connection.openStream()
    try await stream.send(Data("hello".utf8), endOfStream: true)
    let (reply, _) = try await stream.receive(atLeast: 1, atMost: 1024)
    return reply
}

// MARK: ChoosingAStack.md

func articleExample_tlvOverTLS() async throws -> Data {
    let messages = NetworkConnection(to: .hostPort(host: "localhost", port: 9000)) {
        TLV { TLS() }
    }
    try await messages.send(Data("ping".utf8), type: 1)
    let reply = try await messages.receive()
    return reply.content
}

// MARK: PortingFromNetworkFramework.md

func articleExample_classicConnection() -> NWConnection {
    let connection = NWConnection(host: "localhost", port: 7, using: .tcp)
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

// MARK: ConnectivityOnLinux.md

func articleExample_waiting() async -> NetworkConnection<QUIC> {
    let connection = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
        QUIC(alpn: ["h3"])
    }.expensivePathsProhibited(true))
    for await state in connection.states {
        if case .waiting(let error) = state { print("waiting: \(error)") }
        if state == .ready { break }
    }
    return connection
}

func articleExample_pathMonitor() -> NWPathMonitor {
    let monitor = NWPathMonitor(prohibitedInterfaceTypes: [.cellular])
    monitor.pathUpdateHandler = { path in
        print(path.status == .satisfied ? "online" : "offline: \(path.unsatisfiedDescription ?? "")")
    }
    monitor.start(queue: DispatchQueue(label: "paths"))
    return monitor
}

func articleExample_interfaceMarks() {
    NetworkInterfacePolicy.expensiveInterfaces = ["eth1", "usb*"]
    NetworkInterfacePolicy.constrainedInterfaces.insert("wlan1")
}

func articleExample_bonjourListener() async throws {
    let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"]))) {
        TLS().identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    listener.onServiceRegistrationUpdate { _, change in
        if case .add(let endpoint) = change { print("advertised as", endpoint) }
    }
    try await listener.run { connection in print("a player joined from", connection.endpoint) }
}

// MARK: PerformanceAndTuning.md

func articleExample_unbatched() -> NetworkConnection<UDP> {
    let unbatched = NetworkConnection(to: .hostPort(host: "localhost", port: 9000)) {
        UDP().batching(.none)
    }
    return unbatched
}

func articleExample_jumbo() -> NetworkConnection<QUIC> {
    let bulk = NetworkConnection(to: .hostPort(host: "10.0.0.2", port: 4433)) {
        QUIC(alpn: ["perf"]).maxUDPPayloadSize(8952).congestionControl(.bbr)
    }
    return bulk
}

// MARK: RunningAFleet.md

func articleExample_fleetListener() throws -> NetworkListener<QUIC> {
    let keys = try QUIC.FleetKeys(contentsOfFile: "/etc/braid/quic-keys", overlap: .seconds(3600))
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"])
            .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
            .connectionIDFormat(.quicLB(configRotation: 0, serverID: Data([0x0a, 0x01]), nonceLength: 8))
            .fleetKeys(keys)
    }
    return listener
}

// MARK: The stack articles (QUICConnections.md, TLSAndTCP.md, MessageFraming.md and the others);
// their examples with a port, a file or a type of their own run in ReadmeExamples.

func articleExample_tlsStates(port: NWEndpoint.Port) async {
    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: port)) {
        TLS { TCP { IP().fragmentationEnabled(false) } }
    }
    connection.start()  // or the first send or receive
    for await state in connection.states {
        if case .waiting(let error) = state { print("Waiting: \(error)") }  // Braid retries by itself
        if case .ready = state { break }
    }
}

func articleExample_tlvGame() async throws -> Data {
    enum GameMessage: Int {
        case selectedCharacter = 0
        case move = 1
    }

    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) {
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
    return incomingData
}

func articleExample_coderGame() async throws -> GameMessage {
    let connection = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) {
        Coder(GameMessage.self, using: .json) { TLS() }
    }
    try await connection.send(.selectedCharacter("🐨"))
    let gameMessage = try await connection.receive().content
    switch gameMessage {
    case .selectedCharacter(let character): print("Character selected: \(character)")
    case .move(let row, let column): print("Move: (\(row), \(column))")
    }
    return gameMessage
}

func articleExample_coderUDPClient() async throws -> GameMessage {
    let position = NetworkConnection(to: .hostPort(host: "game-server.example.com", port: 9000)) {
        Coder(GameMessage.self, using: .json) { UDP() }
    }
    try await position.send(.move(row: 1, column: 2))
    let update = try await position.receive().content
    return update
}

func articleExample_coderUDPServer() async throws {
    let listener = NetworkListener(port: 9000) { Coder(GameMessage.self, using: .json) { UDP() } }
    try await listener.run { connection in
        for try await (message, _) in connection.messages {
            try await connection.send(message)
        }
    }
}

func articleExample_udpGame() async throws -> Data {
    let game = NetworkConnection(to: .hostPort(host: "game-server.example.com", port: 9000)) { UDP() }
    try await game.send(Data("player_position:100,50".utf8))
    let (data, _) = try await game.receive()
    return data
}

func articleExample_udpEchoServer() async throws {
    let listener = NetworkListener(port: 9000) { UDP() }
    try await listener.run { connection in
        for try await (content, _) in connection.messages {
            try await connection.send(content)
        }
    }
}

func articleExample_webSocketClient() async throws {
    let socket = NetworkConnection(to: .url(URL(string: "wss://www.example.com/chat")!)) {
        WebSocket { TLS() }.subprotocols(["chat"])
    }
    try await socket.send("hello")
    let (content, metadata) = try await socket.receive()
    print(metadata.opcode, String(decoding: content, as: UTF8.self))
    try await socket.close(code: .protocolCode(.normalClosure), reason: "done")
}

func articleExample_webSocketAgreement() async throws {
    let chat = NetworkConnection(to: .url(URL(string: "wss://www.example.com/chat")!)) {
        WebSocket { TLS() }.subprotocols(["chat.v2", "chat"]).perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate())
    }
    try await chat.send("hello")
    _ = try await chat.receive()
    print(chat.selectedSubprotocol ?? "none", chat.negotiatedExtensions ?? "uncompressed")
}

func articleExample_framerClient() async throws {
    let game = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) {
        Framer<GameProtocol> { TLS() }
    }
    let move = NWProtocolFramer.Message(definition: GameProtocol.definition)
    move["type"] = UInt32(2)
    try await game.send(Data("e2e4".utf8), metadata: move)
    let (content, metadata) = try await game.receive()
    print(metadata.framer["type"] as? UInt32 ?? 0, String(decoding: content, as: UTF8.self))
}

func articleExample_framerClassicClient() -> NWConnection {
    let parameters = NWParameters.tls
    parameters.defaultProtocolStack.applicationProtocols.insert(NWProtocolFramer.Options(definition: GameProtocol.definition), at: 0)
    let connection = NWConnection(host: "www.example.com", port: 1029, using: parameters)
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

func articleExample_http3Client() async throws {
    let client = HTTP3Client(quic: QUIC(alpn: ["h3"]).trust(.certificateAuthorities(file: "ca.pem")))
    let request = HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/index.html")
    let (body, response) = try await client.data(for: request)
    print(response.status, body.count)
    client.close()
}

func articleExample_http3Server() async throws {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    try await listener.runHTTP3 { request, body in
        let received = try await body.collect(upTo: 1024 * 1024)
        return (HTTPResponse(status: .ok), .data(Data("got \(received.count) bytes".utf8)))
    }
}

func articleExample_pinnedClient(loadPinnedKey: () -> Data) -> NWConnection {
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
    let connection = NWConnection(host: "localhost", port: 4443, using: NWParameters(tls: tls))
    return connection
}
// MARK: Metrics.md

func articleExample_metricsLabel() -> NetworkListener<QUIC> {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["echo"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    listener.metricsLabel = "echo"
    return listener
}
