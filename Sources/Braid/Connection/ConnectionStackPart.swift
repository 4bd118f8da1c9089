/// What one stack's connections share with the caller's tasks besides the states and snapshot
/// every connection has (`ConnectionShared.stackPart`). The stack's core makes it; the stack's
/// own API reads it, knowing its kind (`QUICShared`, `ByteStreamShared`, `DatagramShared`).
protocol ConnectionStackPart: AnyObject, Sendable {
    /// The connection ended (on its loop): ends what callers may still wait for here.
    func connectionEnded()
}

extension ConnectionStackPart {
    func connectionEnded() {}
}
