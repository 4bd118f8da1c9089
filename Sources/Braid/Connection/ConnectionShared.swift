import BraidCore

/// The parts of a connection other threads touch: its states, the snapshot read at ready, and
/// what its stack shares with the caller's tasks (`stackPart`: the queues, the streams the
/// peer opened, the connection's own byte stream), which the stack's folder makes and reads.
final class ConnectionShared: Sendable {
    let states = StateBroadcast()
    let snapshot = Locked(ConnectionSnapshot())
    /// The stack's own part, made with the connection's core.
    let stackPart: any ConnectionStackPart

    init(stackPart: any ConnectionStackPart) {
        self.stackPart = stackPart
    }
}
