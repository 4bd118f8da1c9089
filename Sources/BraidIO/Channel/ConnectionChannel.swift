import BraidCore
import Logging

/// One connection's owner on its loop, whatever its stack: the QUIC, byte-stream (TLS, TCP)
/// and datagram (UDP) channels all adopt it, so the public layer's connection core holds any
/// of them and starts, ends and reads them through this alone. What only one stack has (QUIC's
/// streams, a UDP connection's datagram queue) is reached on the concrete channel, from that
/// stack's own code.
package protocol ConnectionChannel: AnyObject {
    /// The loop that owns the channel: every call below is made on it.
    var loop: EventLoop { get }
    /// Why the channel ended (already described by the public layer's mapping); nil while it runs.
    var finalError: (any Error)? { get }
    /// What the connection agreed and where it runs, read when the channel reports ready.
    var facts: ConnectionFacts { get }
    /// Called once with what the connection carried when the channel lets its transport go
    /// (nil: nobody asked, and nothing is gathered). Set before the channel ends.
    var trafficObserver: ((ConnectionTraffic) -> Void)? { get set }
    /// Where the channel logs: the connection's logger, carrying its identity
    /// (`ConnectionLogIdentity`) once the public layer has named it.
    var logger: Logger { get set }
    /// How long the handshake took, when the channel measured it better than its owner can
    /// (a QUIC server's: from the client's first Initial, long before the listener hands the
    /// connection over); nil: the owner measures.
    var handshakeDuration: Duration? { get }
    /// Ends every pending call with `error` before the channel has a transport (a failed
    /// start), or at once after.
    func fail(_ error: any Error)
    /// Closes the connection the stack's graceful way and ends every pending call with
    /// cancellation.
    func cancel(context: LoopContext)
    /// Closes at once, without the stack's graceful end where it has an abortive one (TCP:
    /// a reset), and ends every pending call with cancellation.
    func forceCancel(context: LoopContext)
}

extension ConnectionChannel {
    package var handshakeDuration: Duration? { nil }

    /// Stacks without an abortive close (UDP; QUIC, whose close is one packet) cancel.
    package func forceCancel(context: LoopContext) { cancel(context: context) }
}

/// What a channel's owner in the public layer hears from any channel, on the channel's loop.
package protocol ConnectionChannelDelegate: AnyObject {
    /// The connection is established (QUIC and TLS: handshake completed; TCP: connected; UDP:
    /// a socket and a peer): `facts` are set.
    func channelBecameReady(_ channel: any ConnectionChannel)
    /// The channel ended: every pending call has failed with `error` (already described).
    func channel(_ channel: any ConnectionChannel, endedWith error: any Error)
}

/// What a connection agreed and where it runs, as its channel knows them once ready.
package struct ConnectionFacts: Sendable {
    /// The application protocol both ends agreed on (ALPN), if the stack negotiates one.
    package var negotiatedALPN: String?
    /// The server accepted the client's early (0-RTT) data.
    package var earlyDataAccepted = false
    /// The handshake resumed a session.
    package var resumed = false
    /// The connection runs over Multipath TCP.
    package var multipath = false
    package var localAddress: SocketAddress?
    package var remoteAddress: SocketAddress?
    /// A Unix-domain connection's socket file (its addresses are then not IP ones).
    package var unixPath: String?
    /// What a security layer agreed (TLS's version, the peer's certificates); nil without one.
    package var security: SecurityFacts?
    /// What an upgrade above the byte stream (WebSocket's) agreed; nil without one.
    package var upgrade: UpgradeFacts?

    package init(
        negotiatedALPN: String? = nil, earlyDataAccepted: Bool = false, resumed: Bool = false, multipath: Bool = false,
        localAddress: SocketAddress? = nil, remoteAddress: SocketAddress? = nil, unixPath: String? = nil
    ) {
        self.unixPath = unixPath
        self.negotiatedALPN = negotiatedALPN
        self.earlyDataAccepted = earlyDataAccepted
        self.resumed = resumed
        self.multipath = multipath
        self.localAddress = localAddress
        self.remoteAddress = remoteAddress
    }
}
