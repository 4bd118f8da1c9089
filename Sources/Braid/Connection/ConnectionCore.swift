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
}

/// The parts of a connection other threads touch: state, snapshot, the inbound streams, and
/// the channel's datagram queues that async iterators and senders use directly.
final class ConnectionShared: Sendable {
    let states = StateBroadcast()
    let snapshot = Mutex(ConnectionSnapshot())
    let inboundStreams: AsyncStream<QUIC.Stream>
    let inboundStreamsContinuation: AsyncStream<QUIC.Stream>.Continuation
    let datagramInbox: DatagramInbox
    let datagramOutbox: DatagramOutbox

    init(datagramInbox: DatagramInbox, datagramOutbox: DatagramOutbox) {
        (inboundStreams, inboundStreamsContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        self.datagramInbox = datagramInbox
        self.datagramOutbox = datagramOutbox
    }
}

/// A connection's public-facing state on its loop: the owner of its `QUICChannel` (which runs
/// the engine, the streams and the datagram queues in the IO layer) and the delegate that turns
/// what the channel reports into states, the snapshot and stream facades. Only its loop
/// touches it.
final class ConnectionCore: QUICChannelDelegate {
    let channel: QUICChannel
    let shared: ConnectionShared
    /// Description of the peer for error messages.
    let endpointDescription: String

    init(loop: EventLoop, endpointDescription: String, handshakeTimeout: Duration, streamSendLimit: Int) {
        self.endpointDescription = endpointDescription
        channel = QUICChannel(loop: loop, streamSendLimit: streamSendLimit) { error in
            NetworkError(error, endpoint: endpointDescription, handshakeTimeout: handshakeTimeout)
        }
        shared = ConnectionShared(datagramInbox: channel.datagramInbox, datagramOutbox: channel.datagramOutbox)
        channel.delegate = self
    }

    var loop: EventLoop { channel.loop }

    /// Why the connection ended, once it has.
    var finalError: (any Error)? { channel.finalError }

    /// Ends the connection with `error` before (or without) an engine: every pending call fails.
    func fail(_ error: NetworkError) {
        channel.fail(error)
    }

    // MARK: QUICChannelDelegate

    func channelBecameReady(_ channel: QUICChannel) {
        shared.snapshot.withLock {
            $0.negotiatedALPN = channel.negotiatedALPN
            $0.earlyDataAccepted = channel.earlyDataAccepted
            $0.localEndpoint = channel.localAddress.map(NWEndpoint.init)
            $0.remoteEndpoint = channel.remoteAddress.map(NWEndpoint.init)
        }
        shared.states.update(.ready)
    }

    func channel(_ channel: QUICChannel, opened stream: QUICStreamHandle) {
        if let alpn = channel.negotiatedALPN {
            // Known before ready on a server taking 0-RTT streams.
            shared.snapshot.withLock { $0.negotiatedALPN = alpn }
        }
        shared.inboundStreamsContinuation.yield(QUIC.Stream(stream))
    }

    func channel(_ channel: QUICChannel, usableDatagramSizeChanged size: Int?) {
        shared.snapshot.withLock { $0.usableDatagramFrameSize = size }
    }

    func channel(_ channel: QUICChannel, endedWith error: any Error) {
        let error = NetworkError(error)
        shared.states.update(error == .cancelled ? .cancelled : .failed(error))
        shared.inboundStreamsContinuation.finish()
    }

    // MARK: Calls from the public API (on the loop)

    func migrate(context: LoopContext) throws {
        let local = try channel.migrate(context: context)
        shared.snapshot.withLock { $0.localEndpoint = NWEndpoint(local) }
    }
}

extension NWEndpoint {
    init(_ address: SocketAddress) {
        self = .hostPort(host: NWEndpoint.Host(address.ipString), port: NWEndpoint.Port(integerLiteral: address.port))
    }
}
