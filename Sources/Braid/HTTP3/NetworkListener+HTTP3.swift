import BraidCore
import BraidHTTP3
import BraidHTTP3IO
import BraidIO
import BraidQUICIO
import Foundation
import HTTPTypes
import Logging

extension NetworkListener where ApplicationProtocol == QUIC {
    /// Serves HTTP/3 (the QUIC options' ALPN must include `h3`): binds, then calls `handler`
    /// for each request in its own child task, and sends the response it returns. Runs until
    /// the calling task is cancelled, like `run(_:)`.
    ///
    /// ```swift
    /// let listener = NetworkListener(port: 4433) {
    ///     QUIC(alpn: ["h3"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    /// }
    /// try await listener.runHTTP3 { request, body in
    ///     let received = try await body.collect(upTo: 1024 * 1024)
    ///     return (HTTPResponse(status: .ok), .data(Data("got \(received.count) bytes".utf8)))
    /// }
    /// ```
    ///
    /// A handler that throws answers 500 (Internal Server Error) if the response has not
    /// started; once its body is being sent, the stream is cancelled instead. A request whose
    /// header fields cannot be represented as `HTTPRequest` is answered 400. A malformed request
    /// (RFC 9114 section 4.1.2) ends its stream with H3_MESSAGE_ERROR before any handler runs;
    /// a peer that breaks the protocol on its control or QPACK streams is closed with the
    /// HTTP/3 error code. Each request's body is read at the handler's pace (its credit goes back
    /// as `body` is consumed); each response body waits in at most 256 KiB.
    ///
    /// A handler whose request the client cancels (RESET_STREAM), or whose connection ends, is
    /// cancelled (its task). Its request's stream counts against the client's stream limit
    /// (`QUIC.initialMaxBidirectionalStreams(_:)`) until the handler has returned, so a
    /// client resetting requests as it opens them cannot have more handlers running than
    /// that limit; and a client that cancels more requests than `requestCancellationLimit`
    /// allows (the "rapid reset" attack) is closed with H3_EXCESSIVE_LOAD (nil: no limit).
    ///
    /// A request stream whose whole header section has not arrived within
    /// `requestHeaderTimeout` of the stream's opening (a client trickling it, or sending
    /// nothing) is refused: the server stops reading it and resets it with H3_REQUEST_REJECTED
    /// (0x10b: nothing of it was processed, so the client may retry it), drops the fields
    /// received so far, and runs no handler for it (nil: no deadline). Until then, the fields
    /// decoded so far (at most 64 KiB per stream) count against the listener's
    /// `connectionBufferLimit`, as do request body bytes a handler has not read yet and
    /// response body bytes waiting for their stream.
    ///
    /// ```swift
    /// // Slow clients on long paths get 30 s to send a request's header section.
    /// try await listener.runHTTP3(requestHeaderTimeout: .seconds(30)) { request, _ in
    ///     (HTTPResponse(status: .ok), .data(Data("hello".utf8)))
    /// }
    /// ```
    ///
    /// Handlers run on their connection's event loop thread (each is a task preferring the
    /// loop as its executor), so the loop resumes them without a hop to other threads; a
    /// handler that computes for long holds up the loop's other connections meanwhile, and
    /// should do that work in `withTaskExecutorPreference(globalConcurrentExecutor) { ... }`.
    ///
    /// Graceful shutdown: cancelling `runHTTP3` sends each connection GOAWAY, first as a notice
    /// (clients send new requests elsewhere), then, two round trips later, with the last
    /// request it will process (later ones are refused with H3_REQUEST_REJECTED, which clients
    /// retry elsewhere: `HTTP3Client` does). Requests already taken run to completion; each
    /// connection closes with H3_NO_ERROR once they have, or after `shutdownGracePeriod`, and
    /// `runHTTP3` returns when every connection has closed. With `requestsPerConnection`, a
    /// connection shuts down the same way once it has taken that many requests (a few more
    /// may arrive during the first round trip), as servers rotate long-lived connections.
    ///
    /// Not yet: trailers and interim responses.
    public func runHTTP3(
        requestsPerConnection: Int? = nil,
        shutdownGracePeriod: Duration = .seconds(10),
        requestCancellationLimit: HTTP3RequestCancellationLimit? = .default,
        requestHeaderTimeout: Duration? = .seconds(10),
        _ handler: @escaping @Sendable (HTTPRequest, HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody)
    ) async throws {
        if let requestsPerConnection, requestsPerConnection < 1 {
            throw NetworkError.invalidConfiguration("requestsPerConnection must be at least 1 (it is \(requestsPerConnection))")
        }
        if let limit = requestCancellationLimit, limit.requests < 1 || limit.interval <= .zero {
            throw NetworkError.invalidConfiguration(
                "requestCancellationLimit must allow at least 1 request over a positive interval (it allows \(limit.requests) per \(limit.interval))")
        }
        if let requestHeaderTimeout, requestHeaderTimeout <= .zero {
            throw NetworkError.invalidConfiguration(
                "requestHeaderTimeout must be positive (it is \(requestHeaderTimeout)); pass nil for no deadline on a request's header section")
        }
        let cancellationBudget = requestCancellationLimit.map { HTTP3CancellationBudget(requests: $0.requests, per: $0.interval) }
        guard parameters.stack.alpn.contains("h3") else {
            throw NetworkError.invalidConfiguration("an HTTP/3 listener's QUIC options must offer ALPN \"h3\" (they offer \(parameters.stack.alpn))")
        }
        // Each connection's requests are served from its acceptance, by a task on its loop (as
        // the handlers are), not from the connection's task below: that one starts on the
        // global executor, which a busy process (a full test suite on 2 cores) kept from it
        // for seconds while the connection took requests and a graceful shutdown's grace
        // period ran. Kept here, by channel, until that task takes it.
        let servingTasks = Locked<[ObjectIdentifier: (serving: Task<Void, Never>, reference: HTTP3ChannelReference)]>([:])
        let forgetServingTask: @Sendable (ObjectIdentifier) -> Void = { key in servingTasks.withLock { _ = $0.removeValue(forKey: key) } }
        servingTaskCounter.withLock { $0 = { servingTasks.withLock { $0.count } } }
        defer { servingTaskCounter.withLock { $0 = nil } }
        try await run({ connection in
            let core = connection.core
            let key = try await Completion<ObjectIdentifier>.wait(on: connection.loop) { _, completion in
                completion.resume(.success(ObjectIdentifier(core.value.quic)))
            }
            guard let (serving, reference) = servingTasks.withLock({ $0.removeValue(forKey: key) }) else { return }
            // The listener's cancellation does not reach the serving task: it starts a graceful
            // shutdown instead, and the requests taken until the final GOAWAY still run. The
            // task ends when the connection does and every handler has returned.
            await withTaskCancellationHandler {
                await serving.value
            } onCancel: {
                reference.shutDownGracefully()
            }
            // Closed with HTTP/3's H3_NO_ERROR rather than the listener's QUIC code 0.
            await connection.close(applicationErrorCode: HTTP3ErrorCode.noError.code)
        }, prepareChannel: { channel in
            // An HTTP/3 listener's stack is QUIC (this extension is on `NetworkListener<QUIC>`).
            guard let channel = channel as? QUICChannel else { preconditionFailure("an HTTP/3 listener with a \(type(of: channel))") }
            let loop = channel.loop.isVirtual ? nil : channel.loop
            // Each request's handler task is started on the loop as the request arrives.
            let running = RunningHandlers()
            let http3 = HTTP3Channel(
                role: .server, loop: channel.loop, requestsPerConnection: requestsPerConnection, shutdownGracePeriod: shutdownGracePeriod,
                cancellationBudget: cancellationBudget, requestHeaderTimeout: requestHeaderTimeout, onRequest: { exchange in Self.startHandler(exchange, on: loop, running: running, handler) }
            )
            http3.attach(to: channel)
            let requests = http3.shared.requests, key = ObjectIdentifier(channel)
            // The entry goes when the connection's task takes it, or when the serving ends,
            // whichever comes first: a connection the listener never runs a task for leaves
            // nothing behind (a backstop: a cancelled listener accepts no new connection). The serving
            // cannot end before the entry is in: its requests end only when the connection
            // does, which this loop pass (still running here) has to process first.
            let serving = Task(executorPreference: loop) {
                // The stream only ends (with the connection): the requests went to `onRequest`.
                for await _ in requests {}
                await running.allFinished()
                forgetServingTask(key)
            }
            servingTasks.withLock { $0[key] = (serving, http3.reference) }
        })
    }

    /// How many connections' serving tasks `runHTTP3` keeps now (each until the connection's
    /// task takes it or the serving ends); nil unless `runHTTP3` is running.
    package var servingTaskCount: Int? { servingTaskCounter.withLock { $0 }?() }

    /// Runs `handler` for one request in a task of its own, started on the connection's loop
    /// as the request arrives (called there, by the connection's `HTTP3Channel`).
    private static func startHandler(
        _ exchange: HTTP3Exchange, on loop: EventLoop?, running: RunningHandlers,
        _ handler: @escaping @Sendable (HTTPRequest, HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody)
    ) {
        // One unstructured task per request rather than a child task racing a watcher (three
        // tasks): the exchange's end cancels it directly, so a client that resets requests
        // cannot pile up handlers, and a count tells when all have returned.
        running.started()
        let task = Task(executorPreference: loop) {
            await Self.serve(exchange, handler)
            exchange.handlerFinished()
            running.finished()
        }
        exchange.whenEnded { task.cancel() }
    }

    private static func serve(
        _ exchange: HTTP3Exchange, _ handler: @Sendable (HTTPRequest, HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody)
    ) async {
        guard let request = HTTP3FieldMapping.request(exchange.requestFields) else {
            exchange.respond(fields: HTTP3FieldMapping.fields(HTTPResponse(status: .badRequest)), hasBody: false)
            return
        }
        let response: HTTPResponse, body: HTTP3ResponseBody
        do {
            (response, body) = try await handler(request, HTTP3IncomingBody(exchange, cancelsWhenDropped: false))
        } catch {
            logger.debug("HTTP/3 handler for \(request.path ?? "") failed: \(error)")
            exchange.respond(fields: HTTP3FieldMapping.fields(HTTPResponse(status: .internalServerError)), hasBody: false)
            return
        }
        do {
            exchange.respond(fields: HTTP3FieldMapping.fields(response), hasBody: !body.isEmpty)
            guard !body.isEmpty else { return }
            try await body.write(to: HTTP3BodyWriter(outbox: exchange.outbox))
            exchange.outbox.finish()
        } catch {
            exchange.cancel()
        }
    }

    private static var logger: Logger { BraidLog.logger(label: "braid.http3") }
}
