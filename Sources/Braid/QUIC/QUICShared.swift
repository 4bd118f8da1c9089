import BraidIO
import BraidQUICIO

/// What a QUIC connection shares with the caller's tasks: the streams the peer opened, before
/// `inboundStreams` gives each its stack and facade, and the channel's datagram queues that
/// async iterators and senders use directly.
final class QUICShared: ConnectionStackPart {
    let inboundStreams: AsyncStream<QUICStreamHandle>
    let inboundStreamsContinuation: AsyncStream<QUICStreamHandle>.Continuation
    let datagramInbox: DatagramInbox
    let datagramOutbox: DatagramOutbox

    init(datagramInbox: DatagramInbox, datagramOutbox: DatagramOutbox) {
        (inboundStreams, inboundStreamsContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        self.datagramInbox = datagramInbox
        self.datagramOutbox = datagramOutbox
    }

    func connectionEnded() {
        inboundStreamsContinuation.finish()
    }
}

extension ConnectionShared {
    /// A QUIC connection's part (of a `NetworkConnection<QUIC>`, whose API alone calls this).
    var quic: QUICShared {
        guard let part = stackPart(as: QUICShared.self) else { preconditionFailure("a QUIC call on a \(type(of: stackPart)) connection") }
        return part
    }
}
