import Braid
import ServiceLifecycle

/// A ``NetworkListener`` as a swift-service-lifecycle `Service`: run by a `ServiceGroup`, it
/// serves until the group shuts down gracefully, then stops accepting, closes every connection
/// with application error code 0 and returns once those closes are on the wire, as cancelling
/// `NetworkListener.run` does. (`.sigterm` and `.sigint` are ServiceLifecycle's `UnixSignal`s.)
///
/// ```swift
/// let listener = NetworkListener(port: 4433) {
///     QUIC(alpn: ["echo"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
/// }
/// let service = NetworkListenerService(listener) { connection in
///     try await connection.inboundStreams { stream in
///         let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
///         try await stream.send(request, endOfStream: true)
///     }
/// }
/// let group = ServiceGroup(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
public struct NetworkListenerService<ApplicationProtocol: NetworkProtocol>: Service {
    private let body: @Sendable () async throws -> Void

    /// Serves `listener`, calling `handler` once per connection, until graceful shutdown.
    public init(
        _ listener: NetworkListener<ApplicationProtocol>,
        handler: @escaping @Sendable (NetworkConnection<ApplicationProtocol>) async throws -> Void
    ) {
        body = { try await listener.run(handler) }
    }

    public func run() async throws {
        // Graceful shutdown cancels the listener's run, which is how a listener shuts down
        // gracefully; a shutdown before the group starts this service returns at once.
        try await cancelWhenGracefulShutdown { try await body() }
    }
}
