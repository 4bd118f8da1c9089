import Braid
import BraidServiceLifecycle
import BraidHTTP3
import BraidIO
import BraidPerf
import BraidQUIC
import BraidQUICIO
import Foundation
import HTTPTypes
import Logging
import ServiceLifecycle
import UnixSignals
import Testing

// Every ```swift example in a doc comment under Sources/, pasted verbatim (only the indentation
// differs) so it compiles with every build; tools/check-doc-examples.py fails when an example
// is missing here or differs. Names an example uses without defining come in as parameters,
// or as `let`s before the pasted lines. Lines after them only return what the example defines,
// so the build has no unused-value warnings and the tests below can look at the results.

// MARK: Braid

/// Sources/Braid/Connection/NetworkConnection.swift
func docExample_NetworkConnection() async throws -> Data {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 4433)) {
        QUIC(alpn: ["echo"]).trust(.certificateAuthorities(file: "ca.pem"))
    }
    let stream = try await connection.openStream()
    try await stream.send(Data("hello".utf8), endOfStream: true)
    let (reply, _) = try await stream.receive(atLeast: 1, atMost: 1024)
    connection.cancel()
    return reply
}

func docExample_NetworkConnection_onStateUpdate() -> NetworkConnection<TLS> {
    let connection = NetworkConnection(to: .hostPort(host: "example.com", port: 443)) { TLS() }
        .onStateUpdate { _, state in print("state: \(state)") }
        .onViabilityUpdate { _, isViable in print("viable: \(isViable)") }
    return connection
}

/// Sources/Braid/Stack/NetworkParameters.swift (fast open)
func docExample_NetworkParameters_fastOpen() -> NetworkConnection<TLS> {
    let quick = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
        TLS()
    }.fastOpenAllowed(true))
    return quick
}

func docExample_NetworkConnection_states(_ connection: NetworkConnection<QUIC>) async {
    for await state in connection.states {
        if case .waiting(let error) = state { print("waiting: \(error)") }
    }
}

/// Sources/Braid/HTTP3/HTTP3Client.swift
func docExample_HTTP3Client() async throws -> Data {
    let client = HTTP3Client(quic: QUIC(alpn: ["h3"]).trust(.certificateAuthorities(file: "ca.pem")))
    let request = HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/index.html")
    let (body, response) = try await client.data(for: request)
    print(response.status, body.count)
    client.close()
    return body
}

func docExample_HTTP3Client_data(_ client: HTTP3Client) async throws -> (Data, HTTPResponse) {
    let (body, response) = try await client.data(for: HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/1000"))
    return (body, response)
}

func docExample_HTTP3Client_upload(_ client: HTTP3Client) async throws -> (Data, HTTPResponse) {
    let upload = HTTPRequest(method: .post, scheme: "https", authority: "localhost:4433", path: "/upload")
    let (reply, response) = try await client.upload(for: upload, from: Data("hello".utf8))
    return (reply, response)
}

func docExample_HTTP3Client_bytes(_ client: HTTP3Client) async throws -> Int {
    let (body, response) = try await client.bytes(for: HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/100000000"))
    var received = 0
    for try await chunk in body { received += chunk.count }
    _ = response
    return received
}

/// Sources/Braid/HTTP3/HTTP3IncomingBody.swift
func docExample_HTTP3IncomingBody(_ body: HTTP3IncomingBody) async throws -> Int {
    var total = 0
    for try await chunk in body { total += chunk.count }
    return total
}

func docExample_HTTP3IncomingBody_collect(_ body: HTTP3IncomingBody) async throws -> Data {
    let upload = try await body.collect(upTo: 10 * 1024 * 1024)
    return upload
}

/// Sources/Braid/HTTP3/HTTP3ResponseBody.swift
func docExample_HTTP3ResponseBody() -> HTTP3ResponseBody {
    let body = HTTP3ResponseBody.stream { writer in
        for _ in 0..<10 { try await writer.write(Data(repeating: 0x61, count: 1024)) }
    }
    return body
}

/// Sources/Braid/HTTP3/NetworkListener+HTTP3.swift
func docExample_NetworkListener_runHTTP3() async throws {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    try await listener.runHTTP3 { request, body in
        let received = try await body.collect(upTo: 1024 * 1024)
        return (HTTPResponse(status: .ok), .data(Data("got \(received.count) bytes".utf8)))
    }
}

func docExample_NetworkListener_runHTTP3_requestHeaderTimeout() async throws {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    // Slow clients on long paths get 30 s to send a request's header section.
    try await listener.runHTTP3(requestHeaderTimeout: .seconds(30)) { request, _ in
        (HTTPResponse(status: .ok), .data(Data("hello".utf8)))
    }
}

/// Sources/Braid/HTTP3/HTTP3RequestCancellationLimit.swift
func docExample_HTTP3RequestCancellationLimit() async throws {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    try await listener.runHTTP3(requestCancellationLimit: .init(requests: 50, per: .seconds(1))) { request, _ in
        (HTTPResponse(status: .ok), .data(Data("hello".utf8)))
    }
}

/// Sources/Braid/Connection/NetworkConnection+PathUpdates.swift
func docExample_NetworkConnection_onPathUpdate(_ connection: NetworkConnection<QUIC>) {
    connection.onPathUpdate { connection, path in
        print("now over \(path.availableInterfaces.map(\.name)), from \(path.localEndpoint.map { "\($0)" } ?? "?")")
    }
}

func docExample_NetworkConnection_onViabilityUpdate(_ connection: NetworkConnection<QUIC>) {
    connection.onViabilityUpdate { connection, isViable in
        print(isViable ? "the path is back" : "no path for now; keeping the connection")
    }
}

func docExample_NetworkConnection_onBetterPathUpdate(_ connection: NetworkConnection<QUIC>) {
    connection.onBetterPathUpdate { connection, betterPathAvailable in
        if betterPathAvailable { print("a better path exists: reconnect when convenient") }
    }
}

func docExample_NetworkConnection_currentPath(_ connection: NetworkConnection<TCP>) {
    if let path = connection.currentPath, let remote = path.remoteEndpoint {
        print("talking to \(remote) over \(path.availableInterfaces.map(\.name))")
    }
}

func docExample_NetworkConnection_tryNextEndpoint(_ connection: NetworkConnection<TCP>) async throws {
    try await Task.sleep(for: .seconds(2))
    if connection.state != .ready { connection.tryNextEndpoint() }
}

func docExample_NetworkConnection_close(_ connection: NetworkConnection<QUIC>) async {
    await connection.close()
    exit(0)
}

func docExample_withNetworkConnection() async throws -> Data {
    let reply = try await withNetworkConnection(to: .hostPort(host: "::1", port: 4433)) {
        QUIC(alpn: ["echo"])
    } _: { connection in
        let stream = try await connection.openStream()
        try await stream.send(Data("ping".utf8), endOfStream: true)
        return try await stream.receive(atLeast: 4, atMost: 4).content
    }
    return reply
}

/// Sources/Braid/QUIC/NetworkConnection+QUICControl.swift
func docExample_NetworkConnection_cancelApplicationErrorCode(_ connection: NetworkConnection<QUIC>) {
    connection.cancel(applicationErrorCode: 0x101, reason: "shutting down")
}

func docExample_NetworkConnection_closeApplicationErrorCode(_ connection: NetworkConnection<QUIC>) async {
    await connection.close(applicationErrorCode: 0x101, reason: "shutting down")
}

func docExample_NetworkConnection_updateKeys(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.updateKeys()
}

/// Sources/Braid/Connection/ConnectionState.swift
func docExample_NetworkConnectionState(_ connection: NetworkConnection<QUIC>) {
    connection.onStateUpdate { connection, state in
        switch state {
        case .ready: print("connected to \(connection.endpoint)")
        case .waiting(let error): print("no path yet: \(error)")
        case .failed(let error): print("failed: \(error)")
        default: break
        }
    }
}

/// Sources/Braid/QUIC/QUICConnectionAPI.swift
func docExample_NetworkConnection_openStream(_ connection: NetworkConnection<QUIC>) async throws {
    let stream = try await connection.openStream(directionality: .unidirectional)
    try await stream.send(Data("log line".utf8), endOfStream: true)
}

func docExample_NetworkConnection_inboundStreams(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.inboundStreams { stream in
        let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
        try await stream.send(request, endOfStream: true)
    }
}

func docExample_NetworkConnection_migrate(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.migrate()
    print(connection.localEndpoint!)
}

func docExample_QUICStream(_ stream: QUIC.Stream<QUICStream>) async throws -> (UInt32, Data, Bool) {
    try await stream.send(UInt32(5))                    // network byte order
    try await stream.send(Data("hello".utf8), endOfStream: true)
    let length = try await stream.receive(as: UInt32.self).content
    let (body, metadata) = try await stream.receive(exactly: Int(length))
    return (length, body, metadata.isEndOfStream)
}

func docExample_QUICDatagrams(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.datagrams.send(Data([1, 2, 3]))
    for await datagram in connection.datagrams { print(datagram.count) }
}

/// Sources/Braid/DTLS/DTLS.swift
func docExample_DTLS() async throws -> Data {
    let connection = NetworkConnection(to: .hostPort(host: "sensor.example", port: 4433)) {
        DTLS { UDP() }.alpn(["coap"])
    }
    try await connection.send(Data("reading".utf8))
    let (reply, _) = try await connection.receive()
    return reply
}

/// Sources/Braid/DTLS/NWParameters+DTLS.swift
func docExample_NWParameters_dtls() -> NWConnection {
    let tls = NWProtocolTLS.Options()
    sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "coap")
    let connection = NWConnection(host: "sensor.example", port: 5684, using: NWParameters(dtls: tls))
    return connection
}

/// Sources/Braid/DTLS/NWParameters+DTLS.swift (a listener)
func sensorListener(identity: SecIdentity) throws -> NWListener {
    let dtls = NWProtocolTLS.Options()
    sec_protocol_options_set_local_identity(dtls.securityProtocolOptions, sec_identity_create(identity)!)
    return try NWListener(using: NWParameters(dtls: dtls), on: 5684)
}

/// Sources/Braid/DTLS/DTLSConnectionAPI.swift
func docExample_DTLS_send(_ sensor: NetworkConnection<DTLS>) async throws {
    try await sensor.send(Data("reading:21.5".utf8))
}

func docExample_DTLS_batch(_ sensor: NetworkConnection<DTLS>, _ readings: [Data]) async throws {
    try await sensor.batch {
        for reading in readings { try await sensor.send(reading) }
    }
}

func docExample_DTLS_receive(_ sensor: NetworkConnection<DTLS>) async throws -> Data {
    let (reply, _) = try await sensor.receive()
    return reply
}

func docExample_DTLS_messages(_ sensor: NetworkConnection<DTLS>) async throws {
    for try await (content, _) in sensor.messages {
        print("\(content.count) bytes")
    }
}

/// Sources/Braid/UDP/UDPConnectionAPI.swift
func docExample_UDP_send(_ game: NetworkConnection<UDP>) async throws {
    try await game.send(Data("player_position:100,50".utf8))
}

func docExample_UDP_batch(_ game: NetworkConnection<UDP>, _ updates: [Data]) async throws {
    try await game.batch {
        for update in updates { try await game.send(update) }
    }
}

func docExample_UDP_receive(_ game: NetworkConnection<UDP>) async throws -> Data {
    let (data, _) = try await game.receive()
    return data
}

func docExample_UDP_messages(_ game: NetworkConnection<UDP>) async throws {
    for try await (content, metadata) in game.messages {
        print("\(content.count) bytes from \(metadata.remoteEndpoint)")
    }
}

func docExample_UDP_socketStatistics(_ game: NetworkConnection<UDP>) async {
    if let sockets = await game.socketStatistics { print(sockets.sendmmsgCalls) }
}

func docExample_UDP_droppedDatagramCount(_ game: NetworkConnection<UDP>) async {
    if await game.droppedDatagramCount > 0 { print("reading too slowly") }
}

/// Sources/Braid/Endpoint/NWEndpoint.swift
func docExample_NWEndpoint() -> [NWEndpoint] {
    let byName: NWEndpoint = .hostPort(host: "example.com", port: 443)
    let literal: NWEndpoint = .hostPort(host: .ipv6(.loopback), port: 4433)
    let local: NWEndpoint = .unix(path: "/run/game/socket")
    return [byName, literal, local]
}

/// Sources/Braid/Errors/NetworkError.swift
func docExample_NetworkError(_ connection: NetworkConnection<QUIC>) async throws {
    do {
        let stream = try await connection.openStream()
        try await stream.send(Data("hello".utf8), endOfStream: true)
    } catch NetworkError.certificateRejected(let problem) {
        print("the server's certificate is \(problem)")
    } catch NetworkError.noResponse {
        print("nothing answers on that port")
    }
}

/// Sources/Braid/Listener/NetworkListener.swift
func docExample_NetworkListener() async throws {
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

func docExample_NetworkListener_socketStatistics(_ listener: NetworkListener<QUIC>) async {
    if let sockets = await listener.socketStatistics { print(sockets.sendmmsgCalls) }
}

func docExample_NetworkListener_statistics(_ listener: NetworkListener<QUIC>) async {
    if let now = await listener.statistics { print(now.connections, now.halfOpenHandshakes) }
}

/// Sources/Braid/QUIC/ListenerStatistics.swift
func docExample_ListenerStatistics(_ listener: NetworkListener<QUIC>) async {
    if let now = await listener.statistics {
        print("\(now.connections) connections, \(now.halfOpenHandshakes) handshakes in progress")
    }
}

/// Sources/Braid/Stack/ProtocolStack.swift (single expressions: returned, so none is unused)
func docExample_IP() -> QUIC {
    QUIC(alpn: ["echo"]) { UDP { IP().version(.v6) } }
}

func docExample_UDP() -> QUIC {
    QUIC(alpn: ["echo"]) {
        UDP { IP().version(.v4) }.batching(.none)
    }
}

func docExample_NetworkParameters() -> NetworkConnection<QUIC> {
    let connection = NetworkConnection(to: .hostPort(host: "::1", port: 4433), using: .parameters {
        QUIC(alpn: ["echo"])
    }.localPort(50000))
    return connection
}

/// Sources/Braid/QUIC/QUIC.swift
func docExample_QUIC_connectionSendBufferLimit() -> QUIC {
    let stack = QUIC(alpn: ["perf"]).connectionSendBufferLimit(64 * 1024 * 1024)
    return stack
}

func docExample_QUIC() -> NetworkConnection<QUIC> {
    let connection = NetworkConnection(to: .hostPort(host: "example.com", port: 4433)) {
        QUIC(alpn: ["echo"])
            .idleTimeout(10_000)
            .trust(.certificateAuthorities(file: "ca.pem"))
    }
    return connection
}

func docExample_QUICSessionCache(endpoint: NWEndpoint) throws -> NetworkConnection<QUIC> {
    let cache = try QUIC.SessionCache(file: "/var/cache/myapp/quic-tickets")
    let connection = NetworkConnection(to: endpoint) { QUIC(alpn: ["echo"]).sessionCache(cache) }
    return connection
}

// MARK: BraidIO

/// Sources/BraidIO/EventLoop/EventLoop.swift
func docExample_EventLoop() async throws -> UInt16 {
    let loop = try EventLoop(name: "io-0")
    let port = try await loop.submit { context in
        let socket = try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        defer { socket.close() }
        return socket.localAddress.port
    }
    loop.shutdown()
    return port
}

/// Sources/BraidIO/QUIC/QUICClientDriver.swift
func docExample_QUICClientDriver(context: LoopContext, clientContext: QUICClientContext) throws -> QUICClientDriver {
    let driver = try QUICClientDriver(
        context: context, client: clientContext, remote: QUICAddress(ip: "127.0.0.1", port: 4433)!,
        serverName: "localhost") { connection, event in print(event) }
    return driver
}

/// Sources/BraidIO/QUIC/QUICServerDriver.swift
func docExample_QUICServerDriver(context: LoopContext, configuration: QUICServerConfiguration) throws -> QUICServerDriver {
    let server = try QUICServerDriver(
        context: context, endpoint: QUICServerEndpoint(configuration: configuration),
        bindTo: QUICAddress(ip: "0.0.0.0", port: 4433)!) { connection, event in print(event) }
    return server
}

/// Sources/BraidIO/QUIC/QUICServerGroup.swift
func docExample_QUICServerGroup(configuration: QUICServerConfiguration) async throws -> QUICServerGroup {
    let loops = try (0..<2).map { try EventLoop(name: "server-\($0)") }
    let group = try await QUICServerGroup.start(
        loops: loops, configuration: configuration, bindTo: QUICAddress(ip: "0.0.0.0", port: 4433)!
    ) { driver, context in { connection, event in /* runs on the driver's loop */ } }
    return group
}

/// Sources/BraidIO/Socket/DatapathTypes.swift
func docExample_BatchingOptions() -> BatchingOptions {
    var batching = BatchingOptions.all
    batching.segmentationOffload = false   // one datagram per message, still sendmmsg
    return batching
}

// MARK: BraidQUIC

/// Sources/BraidQUIC/Client/QUICClientContext.swift
func docExample_QUICClientContext(path: QUICPath, now: QUICInstant) throws -> QUICConnection {
    var configuration = QUICClientConfiguration(alpn: ["echo"])
    configuration.verification = .init(trustRoots: .certificateAuthorityFile("ca.pem"))
    let context = try QUICClientContext(configuration: configuration)
    let connection = try context.connect(path: path, serverName: "localhost", now: now)
    return connection
}

/// Sources/BraidQUIC/Connection/QUICConnection.swift
func docExample_QUICConnection(path: QUICPath, now: QUICInstant, send: (Transmit) -> Void) throws {
    let context = try QUICClientContext(configuration: .init(alpn: ["echo"]))
    let client = try context.connect(path: path, serverName: "localhost", now: now)
    for transmit in client.pollTransmits(now: now) { send(transmit) }
    // ... feed replies with client.receive(...), then once .handshakeCompleted arrives:
    let id = try client.openStream(bidirectional: true)
    try client.send(streamID: id, bytes: Array("hello".utf8), fin: true)
}

/// Sources/BraidQUIC/Server/QUICServerEndpoint.swift
func docExample_QUICServerEndpoint(bytes: [UInt8], path: QUICPath, now: QUICInstant, send: (Transmit) -> Void) throws {
    let endpoint = try QUICServerEndpoint(configuration: .init(
        alpn: ["echo"], certificateChainFile: "cert.pem", privateKeyFile: "key.pem"))
    if let connection = endpoint.receive(datagram: bytes, path: path, ecn: .notECT, now: now) {
        for transmit in connection.pollTransmits(now: now) { send(transmit) }
        endpoint.applyRoutingChanges(of: connection)
    }
    for transmit in endpoint.pollEndpointTransmits() { send(transmit) }
}

func docExample_QUICServerKeys(configuration: QUICServerConfiguration) throws -> [QUICServerEndpoint] {
    let keys = try QUICServerKeys()
    let endpoints = try (0..<2).map {
        try QUICServerEndpoint(configuration: configuration, keys: keys, connectionIDTag: UInt8($0))
    }
    return endpoints
}

/// Sources/BraidIO/TCP/TCPOptions.swift
func docExample_TCPOptions() -> TCPOptions {
    var options = TCPOptions()
    options.noDelay = true
    options.keepAlive = .init(enabled: true, idle: .seconds(30), interval: .seconds(5), count: 4)
    options.dscp = 46   // EF: IP_TOS / IPV6_TCLASS 184
    return options
}

/// Sources/BraidIO/TCP/StreamIOTypes.swift
func docExample_WriteRegions(socket: TCPSocket, header: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) throws -> Int {
    let written = try socket.write { regions in
        _ = regions.append(header)
        _ = regions.append(body)
    }
    return written
}

// MARK: BraidHTTP3

/// Sources/BraidHTTP3/Core/HTTP3Field.swift
func docExample_HTTP3Field() -> [HTTP3Field] {
    let fields = [HTTP3Field(":method", "GET"), HTTP3Field(":path", "/")]
    return fields
}

/// Sources/BraidHTTP3/Connection/HTTP3Connection.swift
func docExample_HTTP3Connection(quic: QUICConnection) throws -> HTTP3Connection {
    let streams = HTTP3LocalStreams(
        control: try quic.openStream(bidirectional: false),
        qpackEncoder: try quic.openStream(bidirectional: false),
        qpackDecoder: try quic.openStream(bidirectional: false))
    let h3 = try HTTP3Connection(role: .client, localStreams: streams)
    let request = try quic.openStream(bidirectional: true)
    try h3.sendRequest(streamID: request, fields: [
        HTTP3Field(":method", "GET"), HTTP3Field(":scheme", "https"),
        HTTP3Field(":authority", "example.com"), HTTP3Field(":path", "/"),
    ])
    while let write = h3.nextWrite() {
        for (index, piece) in write.pieces.enumerated() {
            let last = index == write.pieces.count - 1
            try quic.send(streamID: write.streamID, bytes: piece.bytes, range: piece.range, fin: write.fin && last)
        }
        if write.pieces.isEmpty { try quic.send(streamID: write.streamID, bytes: [UInt8](), fin: true) }
    }
    // ... and as QUIC events come: h3.receive(streamID:bytes:fin:), then h3.takeEvents().
    return h3
}

// MARK: BraidTLS

/// Sources/BraidTLS/Engine/TLSClientConfiguration.swift
func docExample_TLSClientConfiguration() throws -> TLSConnection {
    var configuration = TLSClientConfiguration(alpn: ["h2", "http/1.1"])
    configuration.verification = .init(trustRoots: .certificateAuthorityFile("ca.pem"))
    let context = try TLSClientContext(configuration: configuration)
    let connection = try TLSConnection.client(context: context, serverName: "example.com")
    return connection
}

/// Sources/BraidTLS/Engine/TLSServerConfiguration.swift
func docExample_TLSServerConfiguration() throws -> TLSConnection {
    var configuration = TLSServerConfiguration(
        alpn: ["h2"], certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
    configuration.peerAuthentication = .required
    configuration.clientCertificateAuthorityFile = "clients-ca.pem"
    let context = try TLSServerContext(configuration: configuration)
    let connection = try TLSConnection.server(context: context)
    return connection
}

/// Sources/BraidTLS/Engine/TLSConnection.swift
func docExample_TLSConnection(context: TLSClientContext, fd: Int32) throws -> TLSConnection {
    let connection = try TLSConnection.client(context: context, serverName: "example.com")
    _ = try connection.process { _ in }  // the first call queues the ClientHello
    connection.withPendingCiphertext { bytes in max(0, write(fd, bytes.baseAddress, bytes.count)) }
    return connection
}

/// Sources/BraidTLS/DTLS/DTLSConnection.swift
func docExample_DTLSConnection(context: DTLSClientContext, fd: Int32) throws -> DTLSConnection {
    let connection = try DTLSConnection.client(context: context, serverName: "example.com")
    _ = try connection.process { _ in }  // the first call queues the ClientHello
    while let datagram = connection.popDatagram() {
        datagram.withUnsafeBytes { _ = send(fd, $0.baseAddress, $0.count, 0) }  // a connected UDP socket
    }
    return connection
}

// The examples that need no fixed port, file or remote server also run, so they are known to
// do what their doc comments say, not only to compile.
@Suite struct DocCommentExamples {
    @Test func eventLoopExampleBindsAnEphemeralPort() async throws {
        #expect(try await docExample_EventLoop() != 0)
    }

    @Test func streamExampleRoundTripsThroughAnEchoServer() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        // The echo server returns the length prefix and the body the example sent.
        let (length, body, _) = try await docExample_QUICStream(try await connection.openStream())
        #expect(length == 5)
        #expect(body == Data("hello".utf8))
    }

    @Test func valueExamplesBuildWhatTheySay() {
        #expect(docExample_NWEndpoint() == [
            .hostPort(host: .name("example.com"), port: 443), .hostPort(host: .ipv6(.loopback), port: 4433),
            .unix(path: "/run/game/socket"),
        ])
        // GSO off, everything else (GRO, sendmmsg/recvmmsg) still on, as the comment says.
        #expect(docExample_BatchingOptions() == BatchingOptions(segmentationOffload: false))
        #expect(docExample_TCPOptions() == TCPOptions(
            noDelay: true, keepAlive: .init(enabled: true, idle: .seconds(30), interval: .seconds(5), count: 4), dscp: 46))
    }

    @Test func tlsConnectionExampleWritesTheClientHello() throws {
        // A pipe stands in for the socket: the ClientHello arrives in it.
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let connection = try docExample_TLSConnection(context: TLSFixtures.client(), fd: fds[1])
        #expect(connection.pendingCiphertextCount == 0)
        var header = [UInt8](repeating: 0, count: 5)
        #expect(read(fds[0], &header, 5) == 5)
        #expect(header[0] == 22)  // a handshake record
    }

    @Test func serverKeysExampleTagsEachEndpoint() throws {
        let endpoints = try docExample_QUICServerKeys(configuration: Fixtures.serverConfiguration())
        #expect(endpoints.map(\.connectionIDTag) == [0, 1])
    }
}

// MARK: Byte-stream stacks

/// Sources/Braid/Stack/IP.swift
func docExample_IP() -> (QUIC, TLS) {
    let quic = QUIC(alpn: ["echo"]) { UDP { IP().version(.v6) } }
    let tls = TLS { TCP { IP().fragmentationEnabled(false).hopLimit(32) } }
    return (quic, tls)
}

/// Sources/Braid/TCP/TCP.swift
func docExample_TCP() -> NetworkConnection<TCP> {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 7000)) {
        TCP { IP().version(.v4) }.noDelay(true).keepalive(idleTimeInSeconds: 60, count: 4, intervalInSeconds: 10)
    }
    return connection
}

/// Sources/Braid/TLS/TLS.swift
func docExample_TLS() -> NetworkConnection<TLS> {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 4443)) {
        TLS { TCP { IP().fragmentationEnabled(false) } }
            .alpn(["echo"])
            .trust(.certificateAuthorities(file: "ca.pem"))
    }
    return connection
}

/// Sources/Braid/TCP/StreamConnectionAPI.swift
func docExample_StreamConnection(_ connection: NetworkConnection<TLS>) async throws -> (Data, UInt32) {
    try await connection.send(Data("Hello, world!".utf8))
    let incoming = try await connection.receive(exactly: 98).content
    let length = try await connection.receive(as: UInt32.self).content
    return (incoming, length)
}

/// Sources/Braid/TCP/StreamConnectionAPI.swift (early data)
func docExample_TLSSendIdempotent(endpoint: NWEndpoint, cache: TLS.SessionCache) async throws -> NetworkConnection<TLS> {
    let connection = NetworkConnection(to: endpoint) { TLS().earlyDataEnabled(true).sessionCache(cache) }
    try await connection.sendIdempotent(Data("GET /status\n".utf8))
    return connection
}

// MARK: Framers

/// Sources/BraidFramers/TLVDecoder.swift
func docExample_TLVDecoder() throws -> TLVMessage? {
    var decoder = TLVDecoder(maximumMessageSize: 1 << 20)
    decoder.append([0, 0, 0, 7, 0, 0, 0, 2, 0x68])
    decoder.append([0x69])
    let message = try decoder.next()  // TLVMessage(type: 7, value: "hi")
    return message
}

/// Sources/BraidFramers/NetworkCoder.swift
func docExample_NetworkCoder() -> some NetworkCoder {
    struct CompactJSON: NetworkCoder {
        func makeEncoder() -> JSONEncoder {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return encoder
        }
        func makeDecoder() -> JSONDecoder { JSONDecoder() }
    }
    return CompactJSON()
}

/// Sources/Braid/Framers/TLV.swift
func docExample_TLV() async throws -> (Data, TLV.Metadata) {
    let chat = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) { TLV { TLS() } }
    try await chat.send(Data("hello".utf8), type: 1)
    let (content, metadata) = try await chat.receive()
    return (content, metadata)
}

func docExample_TLV_maximumMessageSize() -> TLV {
    let stack = TLV { TCP() }.maximumMessageSize(64 * 1024)
    return stack
}

/// Sources/Braid/Framers/Coder.swift
func docExample_Coder() async throws -> String {
    let typed = NetworkConnection(to: .hostPort(host: "www.example.com", port: 1029)) {
        Coder(String.self, using: .json) { TLS() }
    }
    try await typed.send("hello")
    let message = try await typed.receive().content
    return message
}

func docExample_Coder_UDP() async throws -> [Int] {
    let position = NetworkConnection(to: .hostPort(host: "game-server.example.com", port: 9000)) {
        Coder([Int].self, using: .json) { UDP() }
    }
    try await position.send([100, 50])
    let update = try await position.receive().content
    return update
}

/// Sources/Braid/Framers/MessageConnectionAPI.swift
func docExample_TLV_send(_ connection: NetworkConnection<TLV>) async throws {
    try await connection.send(Data("e2e4".utf8), type: 2)
}

func docExample_TLV_receive(_ connection: NetworkConnection<TLV>) async throws {
    let (content, metadata) = try await connection.receive()
    print("type \(metadata.type): \(content.count) bytes")
}

func docExample_TLV_messages(_ connection: NetworkConnection<TLV>) async throws {
    for try await (content, metadata) in connection.messages {
        print("type \(metadata.type): \(content.count) bytes")
    }
}

func docExample_Coder_send(_ typed: NetworkConnection<Coder<String, String, NetworkJSONCoder>>) async throws {
    try await typed.send("hello")
}

func docExample_Coder_receive(_ typed: NetworkConnection<Coder<String, String, NetworkJSONCoder>>) async throws -> String {
    let message = try await typed.receive().content
    return message
}

/// Sources/Braid/QUIC/QUICStream.swift
func docExample_QUICStreamStack(_ connection: NetworkConnection<QUIC>) async throws -> (Data, TLV.Metadata) {
    let stream = try await connection.openStream { quicStream in
        TLV { quicStream }
    }
    try await stream.send(Data("hello".utf8), type: 1)
    let (content, metadata) = try await stream.receive()
    return (content, metadata)
}

/// Sources/Braid/QUIC/QUICConnectionAPI.swift: openStream(directionality:_:)
func docExample_NetworkConnection_openFramedStream(_ connection: NetworkConnection<QUIC>) async throws -> String {
    let stream = try await connection.openStream { quicStream in
        Coder(String.self, using: .json) { quicStream }
    }
    try await stream.send("hello")
    let reply = try await stream.receive().content
    return reply
}

/// Sources/Braid/QUIC/QUICConnectionAPI.swift: inboundStreams(prepending:_:)
func docExample_NetworkConnection_inboundFramedStreams(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.inboundStreams(prepending: { quicStream in TLV { quicStream } }) { stream in
        for try await (content, metadata) in stream.messages {
            try await stream.send(content, type: metadata.type)
        }
    }
}

/// Sources/Braid/QUIC/QUIC+StreamMessages.swift
func docExample_QUICStream_TLV_send(_ connection: NetworkConnection<QUIC>) async throws {
    let stream = try await connection.openStream { quicStream in TLV { quicStream } }
    try await stream.send(Data("e2e4".utf8), type: 2)
    try await stream.send(Data("resign".utf8), type: 3, endOfStream: true)
}

func docExample_QUICStream_TLV_receive(_ stream: QUIC.Stream<TLV>) async throws {
    let (content, metadata) = try await stream.receive()
    print("type \(metadata.type): \(content.count) bytes")
}

func docExample_QUICStream_TLV_messages(_ stream: QUIC.Stream<TLV>) async throws {
    for try await (content, metadata) in stream.messages {
        try await stream.send(content, type: metadata.type)
    }
}

func docExample_QUICStream_Coder_send(_ connection: NetworkConnection<QUIC>) async throws {
    let stream = try await connection.openStream { quicStream in
        Coder(String.self, using: .json) { quicStream }
    }
    try await stream.send("hello", endOfStream: true)
}

func docExample_QUICStream_Coder_receive(_ stream: QUIC.Stream<Coder<String, String, NetworkJSONCoder>>) async throws -> String {
    let reply = try await stream.receive().content
    return reply
}

/// Sources/Braid/QUIC/QUIC+ConnectionIDFormat.swift
func docExample_QUIC_ConnectionIDFormat() -> NetworkListener<QUIC> {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"])
            .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
            .connectionIDFormat(.quicLB(configRotation: 0, serverID: Data([0x0a, 0x01]), nonceLength: 8))
    }
    return listener
}

func docExample_QUIC_connectionIDFormat() -> QUIC {
    let quic = QUIC(alpn: ["h3"]).connectionIDFormat(.katran(version: .v2, serverID: 42))
    return quic
}

/// Sources/Braid/QUIC/QUIC+FleetKeys.swift
func docExample_QUIC_FleetKeys() throws -> NetworkListener<QUIC> {
    let keys = try QUIC.FleetKeys(contentsOfFile: "/etc/braid/quic-keys", overlap: .seconds(3600))
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["h3"])
            .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
            .fleetKeys(keys)
    }
    return listener
}

// MARK: Connectivity

/// Sources/Braid/Connectivity/NWPathMonitor.swift
func docExample_NWPathMonitor() -> NWPathMonitor {
    let monitor = NWPathMonitor()
    monitor.pathUpdateHandler = { path in
        if path.status == .satisfied {
            print("online", path.isExpensive ? "(expensive)" : "")
        } else {
            print("offline")
        }
    }
    monitor.start(queue: DispatchQueue(label: "network-monitor"))
    // ...
    monitor.cancel()
    return monitor
}

/// Sources/Braid/Connectivity/NWPathMonitor+AsyncSequence.swift
func docExample_NWPathMonitor_asyncSequence() async -> NWPath? {
    func waitUntilOnline() async -> NWPath? {
        for await path in NWPathMonitor() where path.status == .satisfied {
            return path
        }
        return nil
    }
    return await waitUntilOnline()
}

/// Sources/Braid/Connectivity/NWPath.swift
func docExample_NWPath() -> NWPath {
    let path = NWPathMonitor().currentPath
    if path.status == .satisfied, !path.isExpensive {
        print("online over", path.availableInterfaces.map(\.name))
    } else if path.status == .unsatisfied {
        print(path.unsatisfiedDescription ?? "")
    }
    return path
}

/// Sources/Braid/Connectivity/NWInterface.swift
func docExample_NWInterface() -> NWPathMonitor {
    let monitor = NWPathMonitor()
    if let first = monitor.currentPath.availableInterfaces.first {
        print(first.name, first.index, first.type == .wiredEthernet)
    }
    return monitor
}

/// Sources/Braid/Connectivity/NetworkInterfacePolicy.swift
func docExample_NetworkInterfacePolicy() -> (Set<String>, Set<String>) {
    NetworkInterfacePolicy.expensiveInterfaces.insert("eth1")
    NetworkInterfacePolicy.constrainedInterfaces = ["usb*"]
    return (NetworkInterfacePolicy.expensiveInterfaces, NetworkInterfacePolicy.constrainedInterfaces)
}

/// Sources/Braid/Stack/NetworkParameters.swift (interface constraints)
func docExample_NetworkParameters_interfaceConstraints() -> NetworkConnection<TLS> {
    let metered = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
        TLS()
    }.expensivePathsProhibited(true).prohibitedInterfaceTypes([.cellular]))
    return metered
}

/// Sources/Braid/Stack/NetworkParameters.swift (requiredInterfaceType)
func docExample_NetworkParameters_requiredInterfaceType() -> NetworkConnection<UDP> {
    let wired = NetworkConnection(to: .hostPort(host: "10.0.0.2", port: 9000), using: .parameters {
        UDP()
    }.requiredInterfaceType(.wiredEthernet))
    return wired
}

/// Sources/Braid/Stack/NetworkParameters.swift (requiredInterface)
func docExample_NetworkParameters_requiredInterface() -> NWPathMonitor {
    let monitor = NWPathMonitor()
    if let uplink = monitor.currentPath.availableInterfaces.first {
        let pinned = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
            QUIC(alpn: ["h3"])
        }.requiredInterface(uplink))
        pinned.start()
    }
    return monitor
}

// MARK: BraidPerf

/// Sources/BraidPerf/PerfRequest.swift
func docExample_PerfRequest() throws -> Int {
    var request = PerfRequest()
    try request.append([0, 0, 0, 0, 0, 0, 0x10, 0], endOfStream: true)
    let size = request.responseSize  // 4096
    return size
}

/// Sources/BraidPerf/EchoDatagram.swift
func docExample_EchoDatagram() -> Int? {
    let datagram = EchoDatagram.make(number: 7, size: 100)
    let number = EchoDatagram.number(ofEcho: datagram, size: 100, count: 10)  // 7
    return number
}

@Suite struct BraidPerfDocExamples {
    @Test func examplesGiveWhatTheyPromise() throws {
        #expect(try docExample_PerfRequest() == 4096)
        #expect(docExample_EchoDatagram() == 7)
    }
}

// MARK: Classic API

/// Sources/Braid/Classic/NWConnection.swift
func docExample_NWConnection() -> NWConnection {
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

/// Sources/Braid/Classic/NWConnection+ContentContext.swift
func docExample_ContentContext(_ connection: NWConnection) {
    connection.send(content: Data("bye".utf8), contentContext: .finalMessage, isComplete: true,
                    completion: .contentProcessed { _ in })
}

/// Sources/Braid/Classic/NWError.swift
func docExample_NWError(_ connection: NWConnection) {
    connection.stateUpdateHandler = { state in
        if case .failed(.posix(.ECONNREFUSED)) = state { print("nothing listens there") }
    }
}

/// Sources/Braid/Classic/NWListener.swift
func docExample_NWListener() throws -> NWListener {
    let listener = try NWListener(using: .tcp, on: 8080)
    listener.newConnectionHandler = { connection in
        connection.start(queue: .main)
        connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, _, _ in
            connection.send(content: content, completion: .contentProcessed { _ in connection.cancel() })
        }
    }
    listener.start(queue: .main)
    return listener
}

/// Sources/Braid/Classic/NWParameters.swift
func docExample_NWParameters() -> NWConnection {
    let parameters = NWParameters(tls: NWProtocolTLS.Options(), tcp: NWProtocolTCP.Options())
    parameters.prohibitExpensivePaths = true
    let connection = NWConnection(host: "example.com", port: 443, using: parameters)
    return connection
}

/// Sources/Braid/Stack/NWProtocolIP.swift
func docExample_NWProtocolIP() -> NWParameters {
    let parameters = NWParameters.udp
    if let ip = parameters.defaultProtocolStack.internetProtocol as? NWProtocolIP.Options {
        ip.version = .v6
    }
    return parameters
}

/// Sources/Braid/TCP/NWProtocolTCP.swift
func docExample_NWProtocolTCP() -> NWParameters {
    let tcp = NWProtocolTCP.Options()
    tcp.noDelay = true
    tcp.enableKeepalive = true
    tcp.keepaliveIdle = 30
    let parameters = NWParameters(tls: nil, tcp: tcp)
    return parameters
}

/// Sources/Braid/TLS/NWProtocolTLS.swift
func docExample_NWProtocolTLS() -> NWParameters {
    let tls = NWProtocolTLS.Options()
    sec_protocol_options_set_min_tls_protocol_version(tls.securityProtocolOptions, .TLSv13)
    sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "h2")
    let parameters = NWParameters(tls: tls)
    return parameters
}

/// Sources/Braid/TLS/NWProtocolTLS+Metadata.swift
func docExample_NWProtocolTLSMetadata(_ connection: NWConnection) {
    if let tls = connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata,
       let alpn = sec_protocol_metadata_get_negotiated_protocol(tls.securityProtocolMetadata) {
        print("speaking \(String(cString: alpn))")
    }
}

/// Sources/Braid/TLS/sec_protocol_options+VerifyBlock.swift
func docExample_sec_protocol_options_set_verify_block() -> NWProtocolTLS.Options {
    let tls = NWProtocolTLS.Options()
    sec_protocol_options_set_verify_block(tls.securityProtocolOptions, { metadata, trust, complete in
        let trust = sec_trust_copy_ref(trust).takeRetainedValue()
        var error: CFError?
        complete(SecTrustEvaluateWithError(trust, &error))
    }, DispatchQueue(label: "verify"))
    return tls
}

// MARK: Security

/// Sources/Braid/TLS/NWProtocolTLS.swift (local identity)
func serverOptions(identity: SecIdentity) -> NWProtocolTLS.Options {
    let tls = NWProtocolTLS.Options()
    sec_protocol_options_set_local_identity(tls.securityProtocolOptions, sec_identity_create(identity)!)
    return tls
}

/// Sources/BraidSecurity/SecPKCS12Import.swift
func docExample_SecPKCS12Import() throws {
    let p12 = try Data(contentsOf: URL(fileURLWithPath: "server.p12"))
    var items: CFArray?
    let status = SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "secret"] as CFDictionary, &items)
    if status == errSecSuccess, let first = (items as? [[String: Any]])?.first,
       let identity = first[kSecImportItemIdentity as String] as! SecIdentity? {
        let tls = sec_identity_create(identity)
        print(tls != nil)
    }
}

/// Sources/BraidSecurity/SecCertificate.swift
func docExample_SecCertificate() throws {
    let der = try Data(contentsOf: URL(fileURLWithPath: "server.der"))
    if let certificate = SecCertificateCreateWithData(nil, der as CFData) {
        print(SecCertificateCopySubjectSummary(certificate) ?? "no name")
    }
}

/// Sources/BraidSecurity/SecKey.swift
func docExample_SecKey(_ certificate: SecCertificate) {
    if let key = SecCertificateCopyKey(certificate),
       let bytes = SecKeyCopyExternalRepresentation(key, nil) as Data? {
        print("key of \(bytes.count) bytes")
    }
}

/// Sources/BraidSecurity/SecPolicy.swift
func docExample_SecPolicy() -> SecPolicy {
    let policy = SecPolicyCreateSSL(true, "example.com" as CFString)
    return policy
}

/// Sources/BraidSecurity/SecTrust.swift
func docExample_SecTrust(_ trust: SecTrust) {
    var error: CFError?
    if SecTrustEvaluateWithError(trust, &error) {
        print("trusted")
    } else {
        print("not trusted: \(error.map { String(describing: $0) } ?? "")")
    }
}

/// Sources/Braid/Classic/NWConnection.swift (metadata)
func docExample_NWConnection_currentPath(_ connection: NWConnection) {
    if let remote = connection.currentPath?.remoteEndpoint {
        print("talking to \(remote)")
    }
}

func docExample_NWConnection_metadata(_ connection: NWConnection) -> NWProtocolTLS.Metadata? {
    let tls = connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata
    return tls
}

/// Sources/Braid/Classic/NWConnection+ContentContext.swift (protocolMetadata(definition:))
func docExample_ContentContext_protocolMetadata(_ connection: NWConnection) {
    connection.receiveMessage { content, context, _, _ in
        let ip = context?.protocolMetadata(definition: NWProtocolIP.definition) as? NWProtocolIP.Metadata
        print(content?.count ?? 0, ip?.ecn == .ce ? "congestion experienced" : "")
    }
}

/// Sources/Braid/QUIC/NWProtocolQUIC.swift
func docExample_NWProtocolQUIC() -> NWConnection {
    let options = NWProtocolQUIC.Options(alpn: ["echo"])
    options.idleTimeout = 10_000
    let connection = NWConnection(host: "example.com", port: 4433, using: NWParameters(quic: options))
    return connection
}

/// Sources/Braid/Stack/NWProtocolIP+Metadata.swift
func docExample_NWProtocolIPMetadata(_ connection: NWConnection) {
    let ip = NWProtocolIP.Metadata()
    ip.ecn = .ect0
    let context = NWConnection.ContentContext(identifier: "probe", metadata: [ip])
    connection.send(content: Data("ping".utf8), contentContext: context, completion: .contentProcessed { _ in })
}

/// Sources/Braid/Stack/NWProtocolIP+Metadata.swift (ecn(_:)), Sources/Braid/Stack/ProtocolMetadataBuilder.swift
func docExample_NWProtocolIPMetadata_builder(_ connection: NetworkConnection<UDP>) async throws {
    try await connection.send(Data("ping".utf8)) { NWProtocolIP.Metadata().ecn(.ect1) }
    try await connection.send(Data("ping".utf8)) { NWProtocolIP.Metadata().ecn(.ect0) }
}

/// Sources/Braid/UDP/NWProtocolUDP+Metadata.swift
func docExample_NWProtocolUDPMetadata() -> NWConnection.ContentContext {
    let context = NWConnection.ContentContext(identifier: "datagram", metadata: [NWProtocolUDP.Metadata()])
    return context
}

/// Sources/Braid/UDP/UDPConnectionAPI.swift (send(_:metadata:))
func docExample_UDP_sendWithMetadata(_ game: NetworkConnection<UDP>) async throws {
    try await game.send(Data("probe".utf8)) { NWProtocolIP.Metadata().ecn(.ect1) }
}

// MARK: WebSocket

/// Sources/Braid/Endpoint/NWEndpoint.swift (URL)
func docExample_NWEndpoint_url() -> NWEndpoint {
    let chat: NWEndpoint = .url(URL(string: "wss://chat.example.com/room/1")!)
    return chat
}

/// Sources/Braid/WebSocket/WebSocket.swift
func docExample_WebSocket() async throws {
    let socket = NetworkConnection(to: .url(URL(string: "wss://echo.example.com/chat")!)) {
        WebSocket { TLS() }.subprotocols(["chat"])
    }
    try await socket.send("hello")
    let (content, metadata) = try await socket.receive()
    print(metadata.opcode, String(decoding: content, as: UTF8.self))
}

func docExample_WebSocket_subprotocols() -> WebSocket {
    let stack = WebSocket { TLS() }.subprotocols(["chat.v2", "chat"])
    return stack
}

func docExample_WebSocket_additionalHeaders() -> WebSocket {
    let stack = WebSocket { TLS() }.additionalHeaders([(name: "Authorization", value: "Bearer token")])
    return stack
}

/// Sources/Braid/WebSocket/NWProtocolWebSocket.swift
func docExample_NWProtocolWebSocket_Options() -> NWParameters {
    let options = NWProtocolWebSocket.Options()
    options.autoReplyPing = true
    options.setSubprotocols(["chat"])
    let parameters = NWParameters.tls
    parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
    return parameters
}

func docExample_NWProtocolWebSocket_Metadata() -> NWProtocolWebSocket.Metadata {
    let metadata = NWProtocolWebSocket.Metadata(opcode: .close)
    metadata.closeCode = .protocolCode(.goingAway)
    return metadata
}

/// Sources/Braid/WebSocket/WebSocketConnectionAPI.swift
func docExample_WebSocket_send(_ socket: NetworkConnection<WebSocket>) async throws {
    try await socket.send(Data([1, 2, 3]))
    try await socket.send(Data("are you there?".utf8)) { NWProtocolWebSocket.Metadata(opcode: .ping) }
}

func docExample_WebSocket_sendText(_ socket: NetworkConnection<WebSocket>) async throws {
    try await socket.send("hello")
}

func docExample_WebSocket_pong(_ socket: NetworkConnection<WebSocket>) async throws {
    let (ping, metadata) = try await socket.receive()
    if metadata.opcode == .ping { try await socket.pong(ping) }
}

func docExample_WebSocket_close(_ socket: NetworkConnection<WebSocket>) async throws {
    try await socket.close(code: .protocolCode(.goingAway), reason: "shutting down")
}

func docExample_WebSocket_receive(_ socket: NetworkConnection<WebSocket>) async throws {
    let (content, metadata) = try await socket.receive()
    if metadata.opcode == .text { print(String(decoding: content, as: UTF8.self)) }
}

func docExample_WebSocket_messages(_ socket: NetworkConnection<WebSocket>) async throws {
    for try await (content, metadata) in socket.messages where metadata.opcode == .binary {
        print("\(content.count) bytes")
    }
}

/// Sources/Braid/Runtime/BraidLogging.swift
func docExample_BraidLogging() {
    BraidLogging.level = .debug
}

/// Sources/BraidServiceLifecycle/NetworkListenerService.swift
func docExample_NetworkListenerService(logger: Logger) async throws {
    let listener = NetworkListener(port: 4433) {
        QUIC(alpn: ["echo"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    let service = NetworkListenerService(listener) { connection in
        try await connection.inboundStreams { stream in
            let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
            try await stream.send(request, endOfStream: true)
        }
    }
    let group = ServiceGroup(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    try await group.run()
}

/// Sources/Braid/Listener/NetworkListener.swift (connectionBufferLimit)
func docExample_NetworkListener_connectionBufferLimit() -> NetworkListener<TLS> {
    let listener = NetworkListener(port: 4433) {
        TLS { TCP() }.identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    listener.connectionBufferLimit = 64 * 1024 * 1024
    return listener
}

// MARK: Custom framers

/// Sources/Braid/Framers/NWProtocolFramer.swift (NWProtocolFramerImplementation)
final class LinesFramer: NWProtocolFramerImplementation {
    static let label = "Lines"
    static let definition = NWProtocolFramer.Definition(implementation: LinesFramer.self)

    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var lineLength: Int?
            let parsed = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 4096) { buffer, _ in
                if let newline = buffer?.firstIndex(of: 10) { lineLength = newline }
                return 0
            }
            guard parsed, let length = lineLength else { return 1 }
            _ = framer.deliverInputNoCopy(length: length, message: NWProtocolFramer.Message(instance: framer), isComplete: true)
            _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { _, _ in 1 }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        try? framer.writeOutputNoCopy(length: messageLength)
        framer.writeOutput(data: Data([10]))
    }
}

/// Sources/Braid/Framers/Framer.swift (FramerProtocol)
extension LinesFramer: FramerProtocol {}

/// Sources/Braid/Framers/NWProtocolFramer.swift
func docExample_NWProtocolFramer() -> NWParameters {
    let options = NWProtocolFramer.Options(definition: LinesFramer.definition)
    let parameters = NWParameters.tcp
    parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
    return parameters
}

func docExample_NWProtocolFramer_Definition() -> NWProtocolFramer.Definition {
    let definition = NWProtocolFramer.Definition(implementation: LinesFramer.self)
    return definition
}

func docExample_NWProtocolFramer_Message() -> NWConnection.ContentContext {
    let message = NWProtocolFramer.Message(definition: LinesFramer.definition)
    message["kind"] = "greeting"
    let context = NWConnection.ContentContext(identifier: "greeting", metadata: [message])
    return context
}

/// Sources/Braid/Framers/Framer.swift
func docExample_Framer() async throws -> (Data, Framer<LinesFramer>.Metadata) {
    let lines = NetworkConnection(to: .hostPort(host: "localhost", port: 7000)) { Framer<LinesFramer> { TCP() } }
    try await lines.send(Data("hello".utf8))
    let (content, metadata) = try await lines.receive()
    return (content, metadata)
}

func docExample_Framer_maximumMessageSize() -> Framer<LinesFramer> {
    let stack = Framer<LinesFramer> { TCP() }.maximumMessageSize(64 * 1024)
    return stack
}

/// Sources/Braid/Framers/FramerConnectionAPI.swift
func docExample_Framer_send(_ lines: NetworkConnection<Framer<LinesFramer>>) async throws {
    let greeting = NWProtocolFramer.Message(definition: LinesFramer.definition)
    greeting["kind"] = "greeting"
    try await lines.send(Data("hello".utf8), metadata: greeting)
}

func docExample_Framer_receive(_ lines: NetworkConnection<Framer<LinesFramer>>) async throws {
    let (content, metadata) = try await lines.receive()
    print(metadata.framer["kind"] as? String ?? "-", content.count)
}

// MARK: WebSocket compression and the upgrade's results

/// Sources/Braid/WebSocket/NWProtocolWebSocket+PerMessageDeflate.swift
func docExample_NWProtocolWebSocket_PerMessageDeflate() -> WebSocket {
    var deflate = NWProtocolWebSocket.PerMessageDeflate()
    deflate.clientNoContextTakeover = true
    let stack = WebSocket { TLS() }.perMessageDeflate(deflate)
    return stack
}

/// Sources/Braid/WebSocket/WebSocket.swift (perMessageDeflate)
func docExample_WebSocket_perMessageDeflate() -> WebSocket {
    let stack = WebSocket { TCP() }.perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate())
    return stack
}

/// Sources/Braid/WebSocket/NWProtocolWebSocket.swift (perMessageDeflate, selectedSubprotocol)
func docExample_NWProtocolWebSocket_Options_perMessageDeflate() -> NWProtocolWebSocket.Options {
    let options = NWProtocolWebSocket.Options()
    options.perMessageDeflate = NWProtocolWebSocket.PerMessageDeflate()
    return options
}

func docExample_NWProtocolWebSocket_Metadata_selectedSubprotocol(_ connection: NWConnection) {
    let webSocket = connection.metadata(definition: NWProtocolWebSocket.definition) as? NWProtocolWebSocket.Metadata
    print(webSocket?.selectedSubprotocol ?? "none")
}

/// Sources/Braid/WebSocket/WebSocketConnectionAPI.swift (selectedSubprotocol, negotiatedExtensions)
func docExample_WebSocket_selectedSubprotocol(_ socket: NetworkConnection<WebSocket>) async throws {
    if socket.selectedSubprotocol == "chat.v2" { try await socket.send("hello, v2") }
}

func docExample_WebSocket_negotiatedExtensions(_ socket: NetworkConnection<WebSocket>) {
    print(socket.negotiatedExtensions ?? "uncompressed")
}

/// Sources/Braid/Discovery/
func docExample_NWBrowser() {
    let browser = NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp)
    browser.browseResultsChangedHandler = { results, changes in
        for result in results { print(result.endpoint) }
    }
    browser.stateUpdateHandler = { state in print(state) }
    browser.start(queue: .main)
}

func docExample_NWBrowser_Result() {
    let browser = NWBrowser(for: .bonjourWithTXTRecord(type: "_game._tcp", domain: nil), using: .tcp)
    browser.browseResultsChangedHandler = { results, _ in
        for result in results {
            if case .bonjour(let txt) = result.metadata { print(result.endpoint, txt["players"] ?? "-") }
        }
    }
}

func docExample_NWListener_Service() throws {
    let listener = try NWListener(using: .tcp)
    listener.service = NWListener.Service(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"]))
    listener.serviceRegistrationUpdateHandler = { change in
        if case .add(let endpoint) = change { print("advertised as", endpoint) }
    }
}

func docExample_NWTXTRecord() {
    var txt = NWTXTRecord(["players": "4"])
    txt["mode"] = "coop"
    let players = txt["players"]
    _ = players
}

func docExample_Bonjour() {
    let browser = NetworkBrowser(for: .bonjour(type: "_game._tcp", domain: nil))
    _ = browser
}

func docExample_NetworkBrowser() async throws {
    let browser = NetworkBrowser(for: .bonjour(type: "_game._tcp", domain: nil))
    let endpoint = try await browser.run { services in
        services.isEmpty ? .continue : .finish(services[0].endpoint)
    }
    _ = endpoint
}

func docExample_NWEndpoint_service() {
    let table: NWEndpoint = .service(name: "Table 7", type: "_game._tcp", domain: "local.", interface: nil)
    _ = table
}

/// Sources/Braid/Listener/NetworkListener.swift (metricsLabel)
func docExample_NetworkListener_metricsLabel() -> NetworkListener<TLS> {
    let listener = NetworkListener(port: 4433) {
        TLS { TCP() }.identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    listener.metricsLabel = "api"
    return listener
}

func docExample_ListenerProvider() throws {
    let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp")) { TCP() }
    _ = listener
}

func docExample_BonjourListenerProvider() throws {
    let provider = BonjourListenerProvider(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"]))
    let listener = try NetworkListener(for: provider) { TCP() }
    _ = listener
}

func docExample_NetworkListener_initForUsing() throws {
    let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp"), using: .parameters { TCP() })
    _ = listener
}

func docExample_NetworkListener_initForStack() throws {
    let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp")) {
        TLS().identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    }
    listener.onServiceRegistrationUpdate { _, change in
        if case .add(let endpoint) = change { print("advertised as", endpoint) }
    }
}

func docExample_NetworkListener_onServiceRegistrationUpdate() throws {
    let listener = try NetworkListener(for: .bonjour(type: "_game._tcp")) { TCP() }
    listener.onServiceRegistrationUpdate { _, change in print(change) }
}

/// Sources/Braid/WebSocket/NWProtocolWebSocket+Response.swift, WebSocket.swift and
/// NWProtocolWebSocket.swift (a listener's answer to upgrade requests)
func docExample_NWProtocolWebSocket_Response() -> NWProtocolWebSocket.Response {
    let response = NWProtocolWebSocket.Response(status: .accept, subprotocol: "chat.v2", additionalHeaders: nil)
    return response
}

func docExample_WebSocket_clientRequestHandler() -> WebSocket {
    let stack = WebSocket { TCP() }.clientRequestHandler { offered, _ in
        NWProtocolWebSocket.Response(status: .accept, subprotocol: offered.contains("chat.v2") ? "chat.v2" : nil, additionalHeaders: nil)
    }
    return stack
}

func docExample_NWProtocolWebSocket_Options_setClientRequestHandler() -> NWProtocolWebSocket.Options {
    let options = NWProtocolWebSocket.Options()
    options.setClientRequestHandler(DispatchQueue(label: "upgrades")) { subprotocols, _ in
        let chosen = subprotocols.first { $0.hasPrefix("chat.") }
        return NWProtocolWebSocket.Response(status: chosen == nil ? .reject : .accept, subprotocol: chosen, additionalHeaders: nil)
    }
    return options
}

/// Sources/Braid/DTLS/DTLSConnectionAPI.swift (negotiatedALPN, droppedDatagramCount)
func docExample_DTLS_negotiatedALPN(_ sensor: NetworkConnection<DTLS>) async throws {
    if sensor.negotiatedALPN == "coap" { try await sensor.send(Data("GET /temp".utf8)) }
}

func docExample_DTLS_droppedDatagramCount(_ sensor: NetworkConnection<DTLS>) async {
    if await sensor.droppedDatagramCount > 0 { print("reading too slowly") }
}

/// Sources/Braid/TCP/NWProtocolTCP.swift
func docExample_NWProtocolTCP_newConnectionLimitPerAddress() throws -> NWListener {
    let tcp = NWProtocolTCP.Options()
    tcp.newConnectionLimitPerAddress = 50
    let listener = try NWListener(using: NWParameters(tls: nil, tcp: tcp))
    return listener
}

/// Sources/Braid/TCP/TCP.swift
func docExample_TCP_newConnectionLimitPerAddress() -> NetworkListener<TLS> {
    let listener = NetworkListener(port: 8443) {
        TLS { TCP().newConnectionLimitPerAddress(50) }
            .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
    }
    return listener
}

/// Sources/Braid/TLS/TLS.swift (fleetKeys)
func docExample_TLS_fleetKeys() throws -> NetworkListener<TLS> {
    let keys = try QUIC.FleetKeys(contentsOfFile: "/etc/braid/fleet-keys")
    let listener = NetworkListener(port: 8443) {
        TLS().identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem").fleetKeys(keys)
    }
    return listener
}
