import BraidCore
import BraidHTTP3
import BraidQUIC
import Testing

/// The HTTP/3 engines over two BraidQUIC engines on the simulated wire (`SimulatedNetwork`):
/// real stream IDs, flow control, loss recovery and the QUIC layer's send budget.
@Suite(.ownThread) struct HTTP3QUICTests {
    final class Run {
        let network: SimulatedNetwork
        var client: HTTP3OverQUIC!
        var servers: [ObjectIdentifier: HTTP3OverQUIC] = [:]
        var respond: ((Int64, HTTP3TestApp.Message) -> HTTP3TestApp.Response?)?

        init(seed: UInt64 = 1, conditions: LinkConditions = LinkConditions(), streamWindow: UInt64 = 256 * 1024) throws {
            network = SimulatedNetwork(seed: seed, server: try Fixtures.server(alpn: ["h3"]) {
                $0.transport.initialMaxBidirectionalStreams = 200
                $0.transport.initialMaxStreamDataBidirectionalRemote = streamWindow
                $0.transport.initialMaxStreamDataBidirectionalLocal = streamWindow
            })
            network.conditions = conditions
            network.onEvent = { [unowned self] connection, event in
                if connection.role == .client {
                    client?.handle(event)
                } else {
                    let glue = servers[ObjectIdentifier(connection)] ?? {
                        let made = HTTP3OverQUIC(connection, now: { [unowned network] in network.now })
                        made.app.respond = { [unowned self] id, message in respond?(id, message) }
                        servers[ObjectIdentifier(connection)] = made
                        return made
                    }()
                    glue.handle(event)
                }
            }
            network.onStep = { [unowned self] in
                client?.service()
                for server in servers.values { server.service() }
            }
        }

        var server: HTTP3OverQUIC? { servers.values.first }

        /// Connects a client whose engine, once ready, runs `ready`; returns after the
        /// handshake.
        func connect(ready: @escaping (HTTP3Connection) -> Void) throws {
            let quic = try network.connect(Fixtures.client(alpn: ["h3"]) { $0.transport.initialMaxStreamDataBidirectionalLocal = 256 * 1024 })
            client = HTTP3OverQUIC(quic, now: { [unowned network] in network.now })
            client.onReady = ready
            #expect(network.run { quic.isEstablished || quic.isClosed })
        }
    }

    @Test func getOverQUIC() throws {
        let run = try Run()
        run.respond = { _, request in
            HTTP3TestApp.Response(fields: HTTP3EngineTests.ok(), body: Array("you asked for \(request.fields.value(of: ":path")!)".utf8))
        }
        try run.connect { engine in
            try? engine.sendRequest(streamID: run.client.openRequestStream(), fields: HTTP3EngineTests.get("/hello"))
        }
        #expect(run.network.run { run.client.app.messages[0]?.ended == true })
        #expect(run.client.app.messages[0]?.fields.value(of: ":status") == "200")
        #expect(run.client.app.messages[0]?.body == Array("you asked for /hello".utf8))
        #expect(run.server?.app.messages[0]?.fields == HTTP3EngineTests.get("/hello"))
    }

    @Test func megabytesBothWaysUnderLossWithFlowControl() throws {
        var conditions = LinkConditions()
        conditions.dropRate = 0.02
        conditions.jitter = .milliseconds(3)
        // A 64 KiB stream window, so flow control stops both senders many times.
        let run = try Run(seed: 5, conditions: conditions, streamWindow: 64 * 1024)
        let upload = pattern(seed: 31, count: 1 << 20)
        let download = pattern(seed: 32, count: 3 << 20)
        run.respond = { _, request in
            let same = request.body == upload
            #expect(same, "\(request.body.count) of \(upload.count) bytes")
            return HTTP3TestApp.Response(fields: HTTP3EngineTests.ok(), body: download, chunkSize: 32 * 1024, trailers: [HTTP3Field("x-done", "1")])
        }
        var streamID: Int64 = -1
        try run.connect { engine in
            streamID = run.client.openRequestStream()
            try? engine.sendRequest(streamID: streamID, fields: HTTP3EngineTests.post("/up"), body: HTTP3TestApp.source(upload, chunkSize: 20_000))
        }
        #expect(run.network.run(for: .seconds(600)) { run.client.app.messages[streamID]?.ended == true })
        #expect(run.server?.app.messages[0]?.body.count == upload.count)
        let body = run.client.app.messages[0]?.body ?? []
        let same = body == download
        #expect(same, "\(body.count) of \(download.count) bytes")
        #expect(run.client.app.messages[0]?.trailers == [HTTP3Field("x-done", "1")])
    }

    @Test func hundredConcurrentRequestsOverQUIC() throws {
        let run = try Run(seed: 6)
        run.respond = { id, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok(), body: pattern(seed: UInt64(id), count: 1000 + Int(id) * 10)) }
        var ids: [Int64] = []
        try run.connect { engine in
            for index in 0..<100 {
                let id = run.client.openRequestStream()
                ids.append(id)
                try? engine.sendRequest(streamID: id, fields: HTTP3EngineTests.get("/\(index)"))
            }
        }
        #expect(ids.count == 100)
        #expect(run.network.run(for: .seconds(120)) { ids.allSatisfy { run.client.app.messages[$0]?.ended == true } })
        for id in ids {
            let body = run.client.app.messages[id]?.body ?? []
            let message = run.client.app.messages[id]
            let same = body == pattern(seed: UInt64(id), count: 1000 + Int(id) * 10)
            #expect(same, "stream \(id): \(body.count) bytes, ended \(String(describing: message?.ended)), reset \(String(describing: message?.reset)), error \(String(describing: message?.streamError))")
        }
        // Every request stream closed on both sides, and the engines forgot them.
        run.network.settle()
        #expect(run.client.engine?.activeStreamCount == 0)
        #expect(run.server?.engine?.activeStreamCount == 0)
    }

    @Test func goawayOverQUIC() throws {
        let run = try Run(seed: 7)
        run.respond = { _, _ in HTTP3TestApp.Response(fields: HTTP3EngineTests.ok(), body: [7]) }
        try run.connect { engine in
            try? engine.sendRequest(streamID: run.client.openRequestStream(), fields: HTTP3EngineTests.get("/a"))
        }
        #expect(run.network.run { run.client.app.messages[0]?.ended == true })
        let server = try #require(run.server?.engine)
        try server.sendShutdownNotice()
        try server.shutdown()
        run.server?.service()
        #expect(run.network.run { run.client.app.goaways.count == 2 })
        #expect(run.client.app.goaways == [(1 << 62) - 4, 4])
        #expect(throws: HTTP3Error.goingAway(lastStreamID: 4)) {
            try run.client.engine!.sendRequest(streamID: run.client.openRequestStream(), fields: HTTP3EngineTests.get("/b"))
        }
        // With nothing in flight the client may close the connection, gracefully.
        #expect(run.client.engine?.activeStreamCount == 0)
        run.client.quic.close(applicationErrorCode: HTTP3ErrorCode.noError.code, now: run.network.now)
        #expect(run.network.run { run.server?.app.connectionErrors.isEmpty == false })
        #expect(run.server?.app.connectionErrors.first == .connectionError(.noError, reason: "", byPeer: true))
    }
}
