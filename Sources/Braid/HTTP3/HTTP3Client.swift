import BraidCore
import BraidHTTP3
import BraidHTTP3IO
import BraidIO
import Foundation
import HTTPTypes

/// An HTTP/3 client, shaped like URLSession's async API over swift-http-types values: one
/// QUIC connection per origin (scheme, host and port), reused by every request to it, with
/// requests multiplexed on its streams.
///
/// ```swift
/// let client = HTTP3Client(quic: QUIC(alpn: ["h3"]).trust(.certificateAuthorities(file: "ca.pem")))
/// let request = HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/index.html")
/// let (body, response) = try await client.data(for: request)
/// print(response.status, body.count)
/// client.close()
/// ```
///
/// Limits: a response body larger than `maximumResponseBodySize` (64 MiB by default) ends
/// its request (the stream is cancelled with H3_REQUEST_CANCELLED) and throws
/// `NetworkError.responseTooLarge`; a request body waits in at most 256 KiB per request
/// before the call waits for the stream. Unread response bytes are bounded by the QUIC
/// stream window (`QUIC.initialMaxStreamDataBidiLocal`).
///
/// `bytes(for:)` streams a response body instead of holding it.
///
/// Resumption and 0-RTT: a new connection to an origin resumes with a session ticket from an
/// earlier one (kept in memory, or in `quic`'s `sessionCache` when it has one). While a
/// resumed connection's handshake is under way, safe requests (GET, HEAD and OPTIONS without
/// a body) are sent at once as 0-RTT data; other requests wait for the handshake, because
/// early data can be replayed. If the server rejects the early data, the same requests are
/// sent again once the handshake completes. A server can turn this off for itself by not
/// accepting early data; `QUIC.sessionCache` decides where tickets live.
///
/// GOAWAY: once a server sends it, new requests go on a new connection while those in flight
/// finish. A request the server did not process (beyond its final GOAWAY, or refused with
/// H3_REQUEST_REJECTED) is sent again on a new connection, up to `maximumAttempts` times in
/// all; after that it throws `NetworkError.streamReset` with code 0x10b (H3_REQUEST_REJECTED).
///
/// Not yet: a streaming request body and trailers.
/// Only `https` URLs (HTTP/3 runs over QUIC, which is always TLS).
public final class HTTP3Client: Sendable {
    /// The QUIC options every connection uses (its ALPN must include `h3`), with a session
    /// cache (an in-memory one unless the options given had one).
    public let quic: QUIC
    /// The largest response body `data(for:)` and `upload(for:from:)` return.
    public let maximumResponseBodySize: Int
    private let connections = Locked<[String: HTTP3ClientConnection]>([:])
    private let counts = Locked((connections: 0, retries: 0))

    /// Connections opened so far, and requests sent again because a server did not process them.
    package var connectionsOpened: Int { counts.withLock { $0.connections } }
    package var requestsRetried: Int { counts.withLock { $0.retries } }

    /// A client whose connections use `quic` (trust, identity, transport limits, where session
    /// tickets are kept).
    public init(quic: QUIC = QUIC(alpn: ["h3"]), maximumResponseBodySize: Int = 64 * 1024 * 1024) {
        self.quic = quic.sessionCache == nil ? quic.sessionCache(QUIC.SessionCache()) : quic
        self.maximumResponseBodySize = maximumResponseBodySize
    }

    deinit {
        for connection in connections.withLock({ $0.values }) { connection.connection.cancel(applicationErrorCode: HTTP3ErrorCode.noError.code) }
    }

    /// Sends `request` (no body) and returns the response's body and head once the whole body
    /// has arrived.
    ///
    /// ```swift
    /// let (body, response) = try await client.data(for: HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/1000"))
    /// ```
    public func data(for request: HTTPRequest) async throws -> (Data, HTTPResponse) {
        try await retrying { try await exchange(request, body: nil) }
    }

    /// Sends `request` with `body` and returns the response's body and head.
    ///
    /// ```swift
    /// let upload = HTTPRequest(method: .post, scheme: "https", authority: "localhost:4433", path: "/upload")
    /// let (reply, response) = try await client.upload(for: upload, from: Data("hello".utf8))
    /// ```
    public func upload(for request: HTTPRequest, from body: Data) async throws -> (Data, HTTPResponse) {
        try await retrying { try await exchange(request, body: body) }
    }

    /// Sends `request` (no body) and returns the response's head as soon as it arrives, with
    /// its body to read as it comes (at the reader's pace, without a size limit: the peer
    /// is held back by flow control, not buffered). Dropping the body before its end cancels
    /// the request.
    ///
    /// ```swift
    /// let (body, response) = try await client.bytes(for: HTTPRequest(method: .get, scheme: "https", authority: "localhost:4433", path: "/100000000"))
    /// var received = 0
    /// for try await chunk in body { received += chunk.count }
    /// ```
    public func bytes(for request: HTTPRequest) async throws -> (HTTP3IncomingBody, HTTPResponse) {
        try await retrying {
            try await NetworkError.mapping {
                let connection = try connection(for: request)
                let exchange = connection.sendRequest(fields: HTTP3FieldMapping.fields(request), hasBody: false)
                do {
                    let response = try await responseHead(exchange)
                    return (HTTP3IncomingBody(exchange, cancelsWhenDropped: true, keepingAlive: connection), response)
                } catch {
                    exchange.cancel()
                    throw error
                }
            }
        }
    }

    /// How many times a request the server did not process is sent in all.
    public static let maximumAttempts = 4

    /// Runs `attempt` again (on a new connection: the one that refused it no longer takes
    /// requests) while it fails with a request the server did not process.
    private func retrying<Result>(_ attempt: () async throws -> Result) async throws -> Result {
        var attempts = 1
        while true {
            do {
                return try await attempt()
            } catch NetworkError.streamReset(let code) where code == HTTP3ErrorCode.requestRejected.code && attempts < Self.maximumAttempts {
                attempts += 1
                counts.withLock { $0.retries += 1 }
            }
        }
    }

    /// Closes every connection (application code H3_NO_ERROR); requests in flight fail with
    /// `NetworkError.cancelled`. The client can still be used: later requests connect again.
    public func close() {
        let all = connections.withLock { connections in
            defer { connections.removeAll() }
            return Array(connections.values)
        }
        for connection in all { connection.connection.cancel(applicationErrorCode: HTTP3ErrorCode.noError.code) }
    }

    private func exchange(_ request: HTTPRequest, body: Data?) async throws -> (Data, HTTPResponse) {
        try await NetworkError.mapping {
            let connection = try connection(for: request)
            let exchange = connection.sendRequest(fields: HTTP3FieldMapping.fields(request), hasBody: body != nil)
            do {
                guard let body else { return try await receiveResponse(exchange) }
                return try await withThrowingTaskGroup(of: Void.self) { uploads in
                    let uploaded = Locked(false)
                    // Sent beside the response: a server may answer before it reads the
                    // whole body, and then the upload is abandoned, not waited on.
                    uploads.addTask {
                        var offset = body.startIndex
                        while offset < body.endIndex {
                            let end = min(offset + 64 * 1024, body.endIndex)
                            try await exchange.outbox.send(body[offset..<end])
                            offset = end
                        }
                        exchange.outbox.finish()
                        uploaded.withLock { $0 = true }
                    }
                    let result = try await receiveResponse(exchange)
                    if !uploaded.withLock({ $0 }) {
                        // The response is complete and the server did not take the whole body.
                        uploads.cancelAll()
                        exchange.cancel()
                    }
                    return result
                }
            } catch {
                exchange.cancel()
                throw error
            }
        }
    }

    /// The final response's head, then its whole body (up to `maximumResponseBodySize`).
    private func receiveResponse(_ exchange: HTTP3Exchange) async throws -> (Data, HTTPResponse) {
        let response = try await responseHead(exchange)
        let maximum = maximumResponseBodySize
        if let length = response.headerFields[.contentLength].flatMap({ Int($0) }), length > maximum {
            throw NetworkError.responseTooLarge(size: length, maximum: maximum)
        }
        var received = Data()
        while let chunk = try await exchange.receiveBody(maximum: 256 * 1024) {
            guard received.count + chunk.count <= maximum else {
                throw NetworkError.responseTooLarge(size: received.count + chunk.count, maximum: maximum)
            }
            // A body that comes in one piece is that piece (appending to an empty Data copies).
            if received.isEmpty { received = chunk } else { received.append(chunk) }
        }
        return (received, response)
    }

    /// The final response's head.
    private func responseHead(_ exchange: HTTP3Exchange) async throws -> HTTPResponse {
        let fields = try await exchange.head()
        guard let response = HTTP3FieldMapping.response(fields) else {
            throw NetworkError.http3ProtocolError(code: HTTP3ErrorCode.messageError.code, reason: "the response's header section cannot be represented as an HTTPResponse")
        }
        return response
    }

    /// How the current connection to `authority` (`host[:port]`) began: whether it resumed
    /// with 0-RTT data the server accepted, and how many requests it sent before its
    /// handshake completed. Nil without a connection, or before its handshake completes.
    package func earlyData(authority: String) -> (accepted: Bool, requests: Int)? {
        guard let (host, port) = Self.hostAndPort(authority),
            let connection = connections.withLock({ $0["\(host):\(port)"] }),
            case .ready = connection.connection.state
        else { return nil }
        return (connection.connection.earlyDataAccepted, connection.shared.earlyRequests)
    }

    /// The origin's connection if it still takes requests, else a new one.
    private func connection(for request: HTTPRequest) throws -> HTTP3ClientConnection {
        guard request.scheme?.lowercased() == "https" else {
            throw NetworkError.unsupported("HTTP/3 requests to scheme \(request.scheme ?? "(none)"); HTTP/3 runs only over https")
        }
        guard let authority = request.authority, let (host, port) = Self.hostAndPort(authority) else {
            throw NetworkError.invalidConfiguration("the request has no valid authority (host[:port]): \(request.authority ?? "(none)")")
        }
        guard quic.alpn.contains("h3") else {
            throw NetworkError.invalidConfiguration("the client's QUIC options must offer ALPN \"h3\" (they offer \(quic.alpn))")
        }
        let key = "\(host):\(port)"
        return connections.withLock { connections in
            if let existing = connections[key], existing.shared.takesNewRequests { return existing }
            let made = HTTP3ClientConnection(endpoint: .hostPort(host: NWEndpoint.Host(host), port: NWEndpoint.Port(integerLiteral: port)), quic: quic)
            connections[key] = made
            counts.withLock { $0.connections += 1 }
            return made
        }
    }

    /// `host[:port]` or `[v6]:port`, port 443 by default.
    static func hostAndPort(_ authority: String) -> (String, UInt16)? {
        var host = Substring(authority)
        var port: UInt16 = 443
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if rest.hasPrefix(":") {
                guard let parsed = UInt16(rest.dropFirst()) else { return nil }
                port = parsed
            } else if !rest.isEmpty {
                return nil
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard let parsed = UInt16(host[host.index(after: colon)...]) else { return nil }
            port = parsed
            host = host[..<colon]
        }
        guard !host.isEmpty else { return nil }
        return (String(host), port)
    }
}

/// One origin's QUIC connection with HTTP/3 on its streams.
final class HTTP3ClientConnection: Sendable {
    let connection: NetworkConnection<QUIC>
    let reference: HTTP3ChannelReference
    let shared: HTTP3ChannelShared

    init(endpoint: NWEndpoint, quic: QUIC) {
        connection = NetworkConnection(to: endpoint, using: NetworkParameters(stack: quic))
        let channel = HTTP3Channel(role: .client, loop: connection.loop)
        reference = channel.reference
        shared = channel.shared
        // The channel takes the QUIC connection's streams before it starts (the loop runs
        // these in order), so no stream event reaches the public stream API.
        let owned = LoopBound(handingOver: channel, to: connection.loop)
        let core = connection.core
        connection.loop.execute { _ in owned.value.attach(to: core.value.quic) }
    }

    /// Sends a request on this connection; the first starts it, once the request is queued (a
    /// resuming connection's first request then goes as 0-RTT data however late this task
    /// runs: on loopback the handshake can complete before it would otherwise be queued).
    func sendRequest(fields: [HTTP3Field], hasBody: Bool) -> HTTP3Exchange {
        let connection = connection
        return reference.sendRequest(fields: fields, hasBody: hasBody) { connection.start() }
    }

    deinit {
        // Replaced (after GOAWAY) and no request holds it: close it as HTTP/3 closes.
        connection.cancel(applicationErrorCode: HTTP3ErrorCode.noError.code)
    }
}
