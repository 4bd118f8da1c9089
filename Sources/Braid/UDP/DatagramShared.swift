import BraidCore
import BraidIO
import Synchronization

/// What a UDP connection (and `Coder` over UDP) shares with the caller's tasks: the channel's
/// queues of whole datagrams, the endpoints `receive()` last returned, and the `batch { }`
/// blocks running.
final class DatagramShared: ConnectionStackPart {
    let outbox: DatagramOutbox
    /// Received datagrams, with their metadata.
    let inbox: MessageInbox<ReceivedDatagram>
    /// The endpoints of the datagram `receive()` last returned (see `DatagramEndpointMemo`).
    let endpoints = Locked(DatagramEndpointMemo())
    /// `batch { }` blocks running: while any runs, sends queue without posting a drain pass,
    /// and the outermost block's end posts one for all of them.
    let batchDepth = Atomic(0)
    /// A custom framer over UDP: its messages' table (`FramerDatagramLayer`), made on first use.
    private let framerTable = Locked<FramerMessages?>(nil)
    var framerMessages: FramerMessages {
        framerTable.withLock { table in
            if let table { return table }
            let made = FramerMessages(inboundLimit: DatagramChannel.inboxBacklog)
            table = made
            return made
        }
    }

    init(outbox: DatagramOutbox, inbox: MessageInbox<ReceivedDatagram>) {
        self.outbox = outbox
        self.inbox = inbox
    }
}

extension ConnectionShared {
    /// A UDP connection's part (nil for other stacks).
    var datagram: DatagramShared? { stackPart(as: DatagramShared.self) }
}
