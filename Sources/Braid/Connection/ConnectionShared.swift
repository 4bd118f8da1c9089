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

    /// The stack's part as `Part`, nil when it is another kind. A check of its exact class
    /// rather than a dynamic cast: the stack's API asks on every send (the parts are final).
    @inline(__always)
    func stackPart<Part: ConnectionStackPart>(as _: Part.Type) -> Part? {
        let part = stackPart
        guard ObjectIdentifier(type(of: part)) == ObjectIdentifier(Part.self) else { return nil }
        return unsafeDowncast(part, to: Part.self)
    }
}
