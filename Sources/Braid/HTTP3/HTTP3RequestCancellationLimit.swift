/// How many requests one HTTP/3 connection's client may cancel before the server closes the
/// connection with H3_EXCESSIVE_LOAD: a defence
/// against the "rapid reset" attack (CVE-2023-44487 and its HTTP/3 kin), where a client opens
/// requests and resets them at once, as fast as it can, so that the server decodes each one
/// and starts and cancels its handler while the client's stream limit never fills.
///
/// A cancellation is a RESET_STREAM or STOP_SENDING from the client on a request stream,
/// counted once per request, unless the server ended the stream first (a malformed or
/// oversized request, a handler that failed). The limit is a budget: `requests` cancellations at once, refilled at
/// `requests` per `interval`; the cancellation past it closes the connection. A browser that
/// abandons a page's requests cancels at most as many as it has open (100 at once by
/// default), well within the default of 200 per 10 seconds.
///
/// Apart from this limit, a request's stream counts against the client's stream limit
/// (`QUIC.initialMaxBidirectionalStreams(_:)`, 100 by default) until its handler has
/// returned, however early the client resets it: at most that many handlers run for one
/// connection at once.
///
/// Apple's Network.framework has no HTTP/3 server; this is Braid's.
///
/// ```swift
/// let listener = NetworkListener(port: 4433) {
///     QUIC(alpn: ["h3"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
/// }
/// try await listener.runHTTP3(requestCancellationLimit: .init(requests: 50, per: .seconds(1))) { request, _ in
///     (HTTPResponse(status: .ok), .data(Data("hello".utf8)))
/// }
/// ```
public struct HTTP3RequestCancellationLimit: Sendable, Hashable {
    /// Cancellations allowed at once, and per `interval` on average.
    public var requests: Int
    /// The period over which `requests` cancellations are allowed again.
    public var interval: Duration

    /// At most `requests` cancellations at once, and `requests` per `interval` on average.
    /// `requests` must be at least 1 and `interval` positive.
    public init(requests: Int, per interval: Duration) {
        self.requests = requests
        self.interval = interval
    }

    /// 200 cancellations at once, and 200 per 10 seconds.
    public static let `default` = HTTP3RequestCancellationLimit(requests: 200, per: .seconds(10))
}
