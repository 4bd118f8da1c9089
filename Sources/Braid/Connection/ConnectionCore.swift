import BraidCore
import BraidIO
import Foundation
import Synchronization

/// What the public objects read without a trip to the loop: set by the loop at ready.
struct ConnectionSnapshot: Sendable {
    var negotiatedALPN: String?
    var usableDatagramFrameSize: Int?
    var localEndpoint: NWEndpoint?
    var remoteEndpoint: NWEndpoint?
    var earlyDataAccepted = false
    var multipath = false
    /// TLS over TCP: the handshake resumed a session.
    var resumed = false
}

/// The parts of a connection other threads touch: state, snapshot, the inbound streams, the
/// channel's datagram queues that async iterators and senders use directly, and (for TLS and
/// TCP) the connection's own byte stream.
final class ConnectionShared: Sendable {
    let states = StateBroadcast()
    let snapshot = Locked(ConnectionSnapshot())
    /// The streams the peer opened, before `inboundStreams` gives each its stack and facade.
    let inboundStreams: AsyncStream<QUICStreamHandle>
    let inboundStreamsContinuation: AsyncStream<QUICStreamHandle>.Continuation
    let datagramInbox: DatagramInbox
    let datagramOutbox: DatagramOutbox
    /// The connection's byte stream, for TLS and TCP (nil for QUIC, whose streams have their own).
    let byteStream: ByteStreamEnd?
    /// The message decoder over `byteStream`, for `TLV` and `Coder` stacks (nil otherwise).
    let messageReceiver: MessageReceiver?
    /// A UDP connection's received datagrams, with their metadata (nil otherwise).
    let udpInbox: MessageInbox<ReceivedDatagram>?
    /// The endpoints of the datagram `receive()` last returned (see `DatagramEndpointMemo`).
    let datagramEndpoints = Locked(DatagramEndpointMemo())
    /// `batch { }` blocks running on a UDP connection: while any runs, sends queue without
    /// posting a drain pass, and the outermost block's end posts one for all of them.
    let batchDepth = Atomic(0)

    init(
        datagramInbox: DatagramInbox, datagramOutbox: DatagramOutbox, byteStream: ByteStreamEnd? = nil,
        messageReceiver: MessageReceiver? = nil, udpInbox: MessageInbox<ReceivedDatagram>? = nil
    ) {
        self.messageReceiver = messageReceiver
        self.udpInbox = udpInbox
        (inboundStreams, inboundStreamsContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        self.datagramInbox = datagramInbox
        self.datagramOutbox = datagramOutbox
        self.byteStream = byteStream
    }
}

/// A connection's public-facing state on its loop: the owner of its channel in the IO layer
/// (a `QUICChannel`, which runs the engine, the streams and the datagram queues; or, for TLS
/// and TCP, a `ByteStreamChannel`) and the delegate that turns what the channel reports into
/// states, the snapshot and stream facades. Only its loop touches it.
final class ConnectionCore: QUICChannelDelegate {
    /// The channel, by kind. The stack decides it when the connection is made, so the
    /// QUIC-only API (on `NetworkConnection<QUIC>`) always finds a QUIC channel, and the
    /// byte-stream API (on TLS and TCP connections) a byte-stream channel.
    enum Owner {
        case quic(QUICChannel)
        case byteStream(ByteStreamChannel)
        case datagram(DatagramChannel)
    }

    let owner: Owner
    let shared: ConnectionShared
    /// Called once when the connection ends (a listener frees the connection's place).
    var whenEnded: (() -> Void)?
    /// Description of the peer for error messages.
    let endpointDescription: String
    /// The watch over the kernel's interfaces (made on first use: `pathWatch(constraints:)`).
    private(set) var madePathWatch: ConnectionPathWatch?
    /// Times a QUIC connection moved to a new path (`migrate()`, or by itself).
    private(set) var migrations: UInt64 = 0

    /// The core of a QUIC connection.
    init(loop: EventLoop, endpointDescription: String, handshakeTimeout: Duration, streamSendLimit: Int, connectionSendLimit: Int) {
        self.endpointDescription = endpointDescription
        let channel = QUICChannel(loop: loop, streamSendLimit: streamSendLimit, connectionSendLimit: connectionSendLimit) { error in
            NetworkError(error, endpoint: endpointDescription, handshakeTimeout: handshakeTimeout)
        }
        owner = .quic(channel)
        shared = ConnectionShared(datagramInbox: channel.datagramInbox, datagramOutbox: channel.datagramOutbox)
        channel.delegate = self
    }

    /// The core of a TLS or TCP connection: one byte stream each way; with
    /// `maximumMessageSize`, a `TLV` or `Coder` connection, whose messages travel on it.
    init(
        loop: EventLoop, endpointDescription: String, tcp: TCP, handshakeTimeout: Duration, maximumMessageSize: Int? = nil,
        borrowsLargeSends: Bool = false
    ) {
        self.endpointDescription = endpointDescription
        let channel = ByteStreamChannel(
            loop: loop, sendLimit: tcp.sendBufferLimit, receiveLimit: tcp.receiveBufferLimit, handshakeTimeout: handshakeTimeout
        ) { error in
            NetworkError(error, endpoint: endpointDescription, handshakeTimeout: handshakeTimeout)
        }
        owner = .byteStream(channel)
        // Not yet on the loop: the channel is handed over with the core.
        let bound = LoopBound(handingOver: channel, to: loop)
        let end = ByteStreamEnd(
            inbox: channel.inbox, outbox: channel.outbox,
            postPump: { loop.execute { context in bound.value.pump(context) } },
            postCreditPass: { loop.execute { context in bound.value.returnConsumedCredit(context) } },
            borrowsLargeSends: borrowsLargeSends)
        // Byte-stream connections carry no datagrams: their queues stay empty and closed.
        let datagramInbox = DatagramInbox(backlog: 0)
        datagramInbox.finish()
        shared = ConnectionShared(
            datagramInbox: datagramInbox, datagramOutbox: DatagramOutbox(limit: 0), byteStream: end,
            messageReceiver: maximumMessageSize.map(MessageReceiver.init(maximumMessageSize:)))
        channel.delegate = self
    }

    /// The core of a UDP connection: datagrams each way through a `DatagramChannel`.
    init(loop: EventLoop, endpointDescription: String) {
        self.endpointDescription = endpointDescription
        let channel = DatagramChannel(loop: loop) { error in NetworkError(error, endpoint: endpointDescription) }
        owner = .datagram(channel)
        let datagramInbox = DatagramInbox(backlog: 0)
        datagramInbox.finish()
        shared = ConnectionShared(datagramInbox: datagramInbox, datagramOutbox: channel.outbox, udpInbox: channel.inbox)
        channel.delegate = self
    }

    /// The core a connection over `stack` needs: a datagram channel for UDP (and `Coder` over
    /// it), a byte-stream channel for TLS and TCP (and the framers over them), a QUIC channel
    /// otherwise (stacks that are not implemented fail on start either way).
    static func make(for stack: some NetworkProtocol, loop: EventLoop, endpointDescription: String) -> ConnectionCore {
        switch stack {
        case is UDP:
            ConnectionCore(loop: loop, endpointDescription: endpointDescription)
        case let framed as any MessageFramedStack where framed.framedLower.udp != nil:
            // One message per datagram: a plain UDP connection, the coder on top.
            ConnectionCore(loop: loop, endpointDescription: endpointDescription)
        case let tls as TLS:
            ConnectionCore(loop: loop, endpointDescription: endpointDescription, tcp: tls.tcp, handshakeTimeout: tls.handshakeTimeout)
        case let tcp as TCP:
            // No TLS handshake to time: the connect has its own timeout (`TCP.connectionTimeout`).
            ConnectionCore(
                loop: loop, endpointDescription: endpointDescription, tcp: tcp, handshakeTimeout: TLS().handshakeTimeout,
                borrowsLargeSends: true)
        case let framed as any MessageFramedStack:
            // A byte-stream connection of the lower stack, with messages on top (an
            // unsupported lower stack gets one too, and fails on start).
            ConnectionCore(
                loop: loop, endpointDescription: endpointDescription, tcp: framed.framedLower.tcp,
                handshakeTimeout: framed.framedLower.tls?.handshakeTimeout ?? TLS().handshakeTimeout,
                maximumMessageSize: framed.maximumMessageSize)
        default:
            ConnectionCore(
                loop: loop, endpointDescription: endpointDescription,
                handshakeTimeout: (stack as? QUIC)?.transport.handshakeTimeout ?? QUIC.defaultTransport.handshakeTimeout,
                streamSendLimit: (stack as? QUIC)?.transport.streamSendBufferLimit ?? QUIC.defaultTransport.streamSendBufferLimit,
                connectionSendLimit: (stack as? QUIC)?.transport.connectionSendBufferLimit
                    ?? QUIC.defaultTransport.connectionSendBufferLimit)
        }
    }

    /// The QUIC channel (of a `NetworkConnection<QUIC>`, whose API alone calls this).
    var channel: QUICChannel {
        guard case .quic(let channel) = owner else { preconditionFailure("a QUIC call on a \(owner) connection") }
        return channel
    }

    /// The byte-stream channel (of a TLS or TCP connection, whose API alone calls this).
    var byteStream: ByteStreamChannel {
        guard case .byteStream(let channel) = owner else { preconditionFailure("a byte-stream call on a QUIC connection") }
        return channel
    }

    /// The datagram channel (of a UDP connection, whose API alone calls this).
    var datagram: DatagramChannel {
        guard case .datagram(let channel) = owner else { preconditionFailure("a UDP call on a \(owner) connection") }
        return channel
    }

    var loop: EventLoop {
        switch owner {
        case .quic(let channel): channel.loop
        case .byteStream(let channel): channel.loop
        case .datagram(let channel): channel.loop
        }
    }

    /// Why the connection ended, once it has.
    var finalError: (any Error)? {
        switch owner {
        case .quic(let channel): channel.finalError
        case .byteStream(let channel): channel.finalError
        case .datagram(let channel): channel.finalError
        }
    }

    /// Ends the connection with `error` before (or without) an engine: every pending call fails.
    func fail(_ error: NetworkError) {
        switch owner {
        case .quic(let channel): channel.fail(error)
        case .byteStream(let channel): channel.fail(error)
        case .datagram(let channel): channel.fail(error)
        }
    }

    /// Ends a byte-stream connection with `error` at once (its socket closes): a framed
    /// connection whose stream lost its message boundaries.
    func failByteStream(_ error: NetworkError, context: LoopContext) {
        byteStream.fail(error, context: context)
    }

    /// Closes the connection (QUIC: application error code 0; TLS: close_notify) and ends
    /// every pending call with `NetworkError.cancelled`.
    func cancel(context: LoopContext) {
        switch owner {
        case .quic(let channel): channel.cancel(context: context)
        case .byteStream(let channel): channel.cancel(context: context)
        case .datagram(let channel): channel.cancel(context: context)
        }
    }

    // MARK: QUICChannelDelegate

    func channelBecameReady(_ channel: QUICChannel) {
        shared.snapshot.withLock {
            $0.negotiatedALPN = channel.negotiatedALPN
            $0.earlyDataAccepted = channel.earlyDataAccepted
            $0.localEndpoint = channel.localAddress.map(NWEndpoint.init)
            $0.remoteEndpoint = channel.remoteAddress.map(NWEndpoint.init)
        }
        becameReady()
    }

    func channel(_ channel: QUICChannel, opened stream: QUICStreamHandle) {
        if let alpn = channel.negotiatedALPN {
            // Known before ready on a server taking 0-RTT streams.
            shared.snapshot.withLock { $0.negotiatedALPN = alpn }
        }
        shared.inboundStreamsContinuation.yield(stream)
    }

    func channel(_ channel: QUICChannel, usableDatagramSizeChanged size: Int?) {
        shared.snapshot.withLock { $0.usableDatagramFrameSize = size }
    }

    func channel(_ channel: QUICChannel, endedWith error: any Error) {
        ended(with: error)
    }

    private func ended(with error: any Error) {
        whenEnded?()
        whenEnded = nil
        madePathWatch?.stop()
        let error = NetworkError(error)
        shared.states.update(error == .cancelled ? .cancelled : .failed(error))
        shared.inboundStreamsContinuation.finish()
    }

    // MARK: Calls from the public API (on the loop)

    /// Moves a QUIC client connection to a new local port, onto the interface `device` when
    /// given; returns the new local address.
    @discardableResult
    func migrate(context: LoopContext, device: String? = nil) throws -> SocketAddress {
        let local = try channel.migrate(context: context, device: device)
        migrations += 1
        shared.snapshot.withLock { $0.localEndpoint = NWEndpoint(local) }
        return local
    }

    /// Ready: the state says so, and the path watch (if any) reports the first path.
    private func becameReady() {
        shared.states.update(.ready)
        madePathWatch?.evaluateNow()
    }

    /// The connection's watch over the kernel's interfaces; the first call makes it with the
    /// connection's interface `constraints`.
    func pathWatch(constraints: InterfaceConstraints) -> ConnectionPathWatch {
        if let madePathWatch { return madePathWatch }
        let made = ConnectionPathWatch(core: self, constraints: constraints)
        madePathWatch = made
        return made
    }
}

extension ConnectionCore: ByteStreamChannelDelegate {
    func channelBecameReady(_ channel: ByteStreamChannel) {
        let multipath = channel.multipathInEffect
        shared.snapshot.withLock {
            $0.multipath = multipath
            $0.earlyDataAccepted = channel.earlyDataAccepted
            $0.resumed = channel.isResumed
            $0.negotiatedALPN = channel.negotiatedALPN
            $0.localEndpoint = channel.localAddress.map(NWEndpoint.init)
            $0.remoteEndpoint = channel.remoteAddress.map(NWEndpoint.init)
        }
        becameReady()
    }

    func channel(_ channel: ByteStreamChannel, endedWith error: any Error) {
        ended(with: error)
    }
}

extension ConnectionCore: DatagramChannelDelegate {
    func channelBecameReady(_ channel: DatagramChannel) {
        shared.snapshot.withLock {
            $0.localEndpoint = channel.localAddress.map(NWEndpoint.init)
            $0.remoteEndpoint = channel.remoteAddress.map(NWEndpoint.init)
        }
        becameReady()
    }

    func channel(_ channel: DatagramChannel, endedWith error: any Error) {
        ended(with: error)
    }
}

extension NWEndpoint {
    init(_ address: SocketAddress) {
        self = .hostPort(host: NWEndpoint.Host(address.ipString), port: NWEndpoint.Port(integerLiteral: address.port))
    }
}
