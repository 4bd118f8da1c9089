import Braid
import Foundation

/// The stacks `braid serve` and `braid client` run the perf and echo applications over, chosen
/// by `--stack`. QUIC carries many streams and datagrams per connection, and the client picks
/// the application with ALPN. TLS and TCP carry one byte stream per connection; UDP and DTLS
/// datagrams only; WebSocket (`ws` over TCP, `wss` over TLS) binary messages, which also carry
/// a byte stream (see `WebSocketChannel`). Over TLS the client picks the application with
/// ALPN; over the others a server serves one application (DTLS checks it with ALPN, WebSocket
/// with its subprotocol).
package enum ApplicationStack: String, CaseIterable, Sendable {
    case quic, tls, tcp, udp, dtls, ws, wss

    /// Whether the client picks the application at the handshake, so one server serves both.
    package var negotiatesApplication: Bool { self == .quic || self == .tls }
    /// Whether the stack needs a server certificate.
    package var isSecure: Bool { self == .quic || self == .tls || self == .dtls || self == .wss }
    /// Whether the stack carries byte streams: perf, and echo with --bytes.
    package var carriesByteStreams: Bool { self != .udp && self != .dtls }
    /// Whether the stack carries messages: echo with --datagrams.
    package var carriesMessages: Bool { self != .tls && self != .tcp }
    /// Echo datagrams a client keeps awaiting their echo: DTLS queues at most
    /// `DTLSConnection.inboxLimit` (64) received datagrams per connection and drops the rest,
    /// so its window stays below that.
    package var datagramWindow: Int { self == .dtls ? 32 : ApplicationClient.datagramWindow }
    /// The names, for help and errors.
    package static var names: String { allCases.map(\.rawValue).joined(separator: "|") }
}

/// A server's certificate chain and private key (PEM files).
package struct ServerIdentity: Sendable {
    package var certificateChainFile: String
    package var privateKeyFile: String
    package init(certificateChainFile: String, privateKeyFile: String) {
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
    }
}

/// How a client checks the server: the CA file (nil: the system's), or no check at all, and
/// the name it expects.
package struct ClientTrust: Sendable {
    package var certificateAuthorities: String?
    package var insecure = false
    package var serverName: String
    package init(certificateAuthorities: String?, insecure: Bool = false, serverName: String) {
        self.certificateAuthorities = certificateAuthorities
        self.insecure = insecure
        self.serverName = serverName
    }
}

extension ApplicationServer {
    /// Serves `applications` over `stack` (any but QUIC, which `serve(_:)` serves a connection
    /// of) on `host`:`port` until cancelled: then the listener stops accepting, closes every
    /// connection and returns. `listening` hears the bound port once; `report` hears each
    /// finished connection (the `braid serve --json` line). A stack that does not negotiate
    /// the application serves the first of `applications`.
    package static func run(
        stack: ApplicationStack, host: String, port: UInt16, applications: [String], identity: ServerIdentity?,
        listening: @escaping @Sendable (UInt16) -> Void, report: @escaping @Sendable ([String: Any]) -> Void
    ) async throws {
        let endpoint = NWEndpoint.hostPort(host: NWEndpoint.Host(host), port: NWEndpoint.Port(integerLiteral: port))
        let single = applications.first ?? EchoService.alpn
        func tls() -> TLS {
            var tls = TLS()
            if let identity { tls = tls.identity(certificateChainFile: identity.certificateChainFile, privateKeyFile: identity.privateKeyFile) }
            return tls
        }
        switch stack {
        case .quic:
            throw ApplicationFailure("QUIC is served connection by connection: ApplicationServer.serve(_:)")
        case .tls:
            let stack = tls().alpn(applications)
            try await run(NetworkListener(for: endpoint) { stack }, listening: listening, report: report) { connection in
                // The application is known once the handshake is done.
                _ = await becomesReady(connection)
                return await serve(connection, stack: .tls, application: connection.negotiatedALPN ?? single, bytes: connection, messages: nil)
            }
        case .tcp:
            try await run(NetworkListener(for: endpoint) { TCP() }, listening: listening, report: report) { connection in
                await serve(connection, stack: .tcp, application: single, bytes: connection, messages: nil)
            }
        case .ws, .wss:
            let socket = stack == .ws ? WebSocket { TCP() } : WebSocket { tls() }
            let webSocket = socket.subprotocols([single])
            try await run(NetworkListener(for: endpoint) { webSocket }, listening: listening, report: report) { connection in
                let channel = WebSocketChannel(connection)
                return await serve(connection, stack: stack, application: single, bytes: channel, messages: channel)
            }
        case .udp:
            try await run(NetworkListener(for: endpoint) { UDP() }, listening: listening, report: report) { connection in
                await serve(connection, stack: .udp, application: single, bytes: nil, messages: UDPMessageChannel(connection: connection))
            }
        case .dtls:
            // Clients are not asked for certificates: the tool's clients present none.
            var dtls = DTLS { UDP() }.alpn([single]).peerAuthentication(.none)
            if let identity { dtls = dtls.identity(certificateChainFile: identity.certificateChainFile, privateKeyFile: identity.privateKeyFile) }
            let stack = dtls
            try await run(NetworkListener(for: endpoint) { stack }, listening: listening, report: report) { connection in
                await serve(connection, stack: .dtls, application: single, bytes: nil, messages: DTLSMessageChannel(connection: connection))
            }
        }
    }

    private static func run<Stack: NetworkProtocol>(
        _ listener: NetworkListener<Stack>, listening: @escaping @Sendable (UInt16) -> Void,
        report: @escaping @Sendable ([String: Any]) -> Void,
        handler: @escaping @Sendable (NetworkConnection<Stack>) async -> [String: Any]
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Cancelling `run` is the listener's graceful shutdown: it stops accepting, closes
            // every connection, and returns once the closes are sent.
            group.addTask { try await listener.run { connection in report(await handler(connection)) } }
            for await state in listener.states {
                if state == .ready, let port = listener.port { listening(port.rawValue) }
                if case .failed(let error) = state { throw ApplicationFailure("cannot listen: \(error)") }
                if state.isFinal { break }
            }
            try await group.waitForAll()
        }
    }

    /// Runs `application` on one connection of a stack with one byte stream or messages, then
    /// closes it; returns the report line.
    private static func serve<Stack: NetworkProtocol>(
        _ connection: NetworkConnection<Stack>, stack: ApplicationStack, application: String,
        bytes: (any ByteChannel)?, messages: (any MessageChannel)?
    ) async -> [String: Any] {
        var report: [String: Any] = ["event": "closed", "stack": stack.rawValue, "alpn": application]
        do {
            if application == PerfService.alpn, let bytes {
                let exchange = try await PerfService.serve(channel: bytes)
                report["streams_ok"] = 1
                report["bytes_uploaded"] = exchange.uploaded
                report["upload_intact"] = exchange.uploadIntact
            } else if let messages {
                report["messages_echoed"] = 0
                try await messages.receiveMessages { message in
                    try await EchoService.echo(message, on: messages)
                    report["messages_echoed"] = (report["messages_echoed"] as? Int ?? 0) + 1
                    return true
                }
            } else if let bytes {
                report["bytes_echoed"] = try await EchoService.serve(channel: bytes)
            }
        } catch NetworkError.peerClosed(code: 0, _) where stack == .dtls {
            // The client's close_notify: a DTLS session's orderly end.
        } catch {
            // UDP connections have no end of their own: the shutdown ends them.
            if !Task.isCancelled { report["error"] = "\(error)" }
        }
        if let remote = connection.currentPath?.remoteEndpoint { report["remote"] = "\(remote)" }
        await connection.close()
        report["state"] = "\(connection.state)"
        return report
    }
}

extension ApplicationClient {
    /// The transport of a run of `application` over `stack` (any but QUIC, whose client
    /// `QUICTransport` wraps a connection the caller configures) to `host`:`port`.
    package static func transport(
        stack: ApplicationStack, host: String, port: UInt16, application: String, trust: ClientTrust
    ) throws -> any ApplicationTransport {
        let endpoint = NWEndpoint.hostPort(host: NWEndpoint.Host(host), port: NWEndpoint.Port(integerLiteral: port))
        func tls() -> TLS {
            var tls = TLS().serverName(trust.serverName)
            if let ca = trust.certificateAuthorities { tls = tls.trust(.certificateAuthorities(file: ca)) }
            if trust.insecure { tls = tls.insecureAcceptAnyCertificate() }
            return tls
        }
        switch stack {
        case .quic:
            throw ApplicationFailure("a QUIC client runs over the connection its caller configures: QUICTransport")
        case .tls:
            let stack = tls().alpn([application])
            return ConnectionTransport(
                name: "tls", connect: { NetworkConnection(to: endpoint) { stack } }, byteChannel: { $0 }, messages: nil)
        case .tcp:
            return ConnectionTransport(name: "tcp", connect: { NetworkConnection(to: endpoint) { TCP() } }, byteChannel: { $0 }, messages: nil)
        case .ws, .wss:
            let socket = (stack == .ws ? WebSocket { TCP() } : WebSocket { tls() }).subprotocols([application])
            return ConnectionTransport(
                name: stack.rawValue, connect: { NetworkConnection(to: endpoint) { socket } },
                byteChannel: { WebSocketChannel($0) }, messages: { WebSocketChannel($0) })
        case .udp:
            return ConnectionTransport(
                name: "udp", connect: { NetworkConnection(to: endpoint) { UDP() } }, byteChannel: nil,
                messages: { UDPMessageChannel(connection: $0) })
        case .dtls:
            var dtls = DTLS { UDP() }.alpn([application]).serverName(trust.serverName)
            if let ca = trust.certificateAuthorities { dtls = dtls.trust(.certificateAuthorities(file: ca)) }
            if trust.insecure { dtls = dtls.insecureAcceptAnyCertificate() }
            let stack = dtls
            return ConnectionTransport(
                name: "dtls", connect: { NetworkConnection(to: endpoint) { stack } }, byteChannel: nil,
                messages: { DTLSMessageChannel(connection: $0) })
        }
    }
}
