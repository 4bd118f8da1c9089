import Braid
import BraidIO
import BraidQUIC
import Foundation

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
