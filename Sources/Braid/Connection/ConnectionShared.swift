import BraidCore
import BraidIO
import BraidQUICIO
import Synchronization

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
