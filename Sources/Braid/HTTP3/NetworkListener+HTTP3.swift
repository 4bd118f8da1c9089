import BraidHTTP3
import BraidIO
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
    /// cancelled (its task), so a client resetting requests cannot pile up handlers.
    ///
    /// Not yet: trailers, interim responses, and a graceful shutdown with GOAWAY (cancelling
    /// `runHTTP3` closes each connection at once with H3_NO_ERROR).
    public func runHTTP3(
        _ handler: @escaping @Sendable (HTTPRequest, HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody)
    ) async throws {
        guard parameters.stack.alpn.contains("h3") else {
            throw NetworkError.invalidConfiguration("an HTTP/3 listener's QUIC options must offer ALPN \"h3\" (they offer \(parameters.stack.alpn))")
        }
        try await run({ connection in
            let core = connection.core
            let shared = try await Completion<HTTP3ChannelShared?>.wait(on: connection.loop) { _, completion in
                completion.resume(.success((core.value.channel.streamConsumer as? HTTP3Channel)?.shared))
            }
            guard let shared else { return }
            await withDiscardingTaskGroup { tasks in
                for await exchange in shared.requests {
                    tasks.addTask {
                        // The handler runs only while its request lives: a client that resets
                        // requests cannot pile up handlers (they are cancelled).
                        await withTaskGroup(of: Void.self) { running in
                            running.addTask { await Self.serve(exchange, handler) }
                            running.addTask { try? await exchange.ended() }
                            await running.next()
                            running.cancelAll()
                        }
                    }
                }
            }
            // The listener is shutting down (or the connection ended): close with HTTP/3's
            // H3_NO_ERROR rather than the listener's QUIC code 0.
            await connection.close(applicationErrorCode: HTTP3ErrorCode.noError.code)
        }, prepareQUIC: { channel in
            HTTP3Channel(role: .server, loop: channel.loop).attach(to: channel)
        })
    }

    private static func serve(
        _ exchange: HTTP3Exchange, _ handler: @Sendable (HTTPRequest, HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody)
    ) async {
        guard let request = HTTP3FieldMapping.request(exchange.requestFields) else {
            try? await exchange.respond(fields: HTTP3FieldMapping.fields(HTTPResponse(status: .badRequest)), hasBody: false)
            return
        }
        let response: HTTPResponse, body: HTTP3ResponseBody
        do {
            (response, body) = try await handler(request, HTTP3IncomingBody(exchange, cancelsWhenDropped: false))
        } catch {
            logger.debug("HTTP/3 handler for \(request.path ?? "") failed: \(error)")
            try? await exchange.respond(fields: HTTP3FieldMapping.fields(HTTPResponse(status: .internalServerError)), hasBody: false)
            return
        }
        do {
            try await exchange.respond(fields: HTTP3FieldMapping.fields(response), hasBody: !body.isEmpty)
            guard !body.isEmpty else { return }
            try await body.write(to: HTTP3BodyWriter(outbox: exchange.outbox))
            exchange.outbox.finish()
        } catch {
            exchange.cancel()
        }
    }

    private static var logger: Logger { Logger(label: "braid.http3") }
}
