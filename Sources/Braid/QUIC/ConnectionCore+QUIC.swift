import BraidIO
import BraidQUIC
import BraidQUICIO

/// A QUIC connection's core: its `QUICChannel`, and what only QUIC's channel reports (streams
/// the peer opened, the usable datagram size) or does (migration).
extension ConnectionCore: QUICChannelDelegate {
    /// The core of a QUIC connection, whose streams and connection hold at most the transport
    /// configuration's send limits unacknowledged.
    convenience init(quicOn loop: EventLoop, endpointDescription: String, transport: QUICTransportConfiguration) {
        let handshakeTimeout = transport.handshakeTimeout
        let channel = QUICChannel(
            loop: loop, streamSendLimit: transport.streamSendBufferLimit, connectionSendLimit: transport.connectionSendBufferLimit
        ) { error in
            NetworkError(error, endpoint: endpointDescription, handshakeTimeout: handshakeTimeout)
        }
        self.init(
            channel: channel, shared: ConnectionShared(stackPart: QUICShared(datagramInbox: channel.datagramInbox, datagramOutbox: channel.datagramOutbox)),
            endpointDescription: endpointDescription)
        channel.delegate = self
    }

    /// The QUIC channel (of a `NetworkConnection<QUIC>`, whose API alone calls this).
    var quic: QUICChannel {
        guard let channel = owner as? QUICChannel else { preconditionFailure("a QUIC call on a \(type(of: owner)) connection") }
        return channel
    }

    func channel(_ channel: QUICChannel, opened stream: QUICStreamHandle) {
        if let alpn = channel.negotiatedALPN {
            // Known before ready on a server taking 0-RTT streams.
            shared.snapshot.withLock { $0.negotiatedALPN = alpn }
        }
        shared.quic.inboundStreamsContinuation.yield(stream)
    }

    func channel(_ channel: QUICChannel, usableDatagramSizeChanged size: Int?) {
        shared.snapshot.withLock { $0.usableDatagramFrameSize = size }
    }

    /// Moves a QUIC client connection to a new local port, onto the interface `device` when
    /// given; returns the new local address.
    @discardableResult
    func migrate(context: LoopContext, device: String? = nil) throws -> SocketAddress {
        let local = try quic.migrate(context: context, device: device)
        migrations += 1
        shared.snapshot.withLock { $0.localEndpoint = NWEndpoint(local) }
        return local
    }
}
