/// What one TCP socket (or listener) did, counted at each system call: the stream
/// counterpart of `SocketCounters`, so a connection's syscall cost is exact (calls that end in
/// EAGAIN are counted too; they cost as much as the others).
public struct StreamSocketCounters: Sendable, Hashable {
    /// recv calls, of which `readWouldBlock` found nothing and `readEndOfStream` found the end.
    public var readCalls: UInt64 = 0
    public var readWouldBlock: UInt64 = 0
    public var readEndOfStream: UInt64 = 0
    public var bytesRead: UInt64 = 0
    /// sendmsg calls (writev with MSG_NOSIGNAL), of which `writeWouldBlock` wrote nothing and
    /// `partialWrites` wrote less than offered.
    public var writeCalls: UInt64 = 0
    public var writeWouldBlock: UInt64 = 0
    public var partialWrites: UInt64 = 0
    public var bytesWritten: UInt64 = 0
    /// Regions handed to the kernel across all writes (a write of 3 regions counts 3).
    public var regionsWritten: UInt64 = 0
    /// accept4 calls (listeners), of which `acceptWouldBlock` found no connection.
    public var acceptCalls: UInt64 = 0
    public var acceptWouldBlock: UInt64 = 0
    /// Accepts that hit the descriptor or memory limit (EMFILE, ENFILE, ENOBUFS, ENOMEM), each
    /// followed by a pause of the listener's read interest.
    public var acceptPauses: UInt64 = 0
    /// Every other system call: socket, setsockopt, getsockopt, bind, listen, connect,
    /// getsockname, shutdown, close.
    public var controlCalls: UInt64 = 0

    public init() {}

    /// System calls issued, all kinds.
    public var syscalls: UInt64 { readCalls + writeCalls + acceptCalls + controlCalls }

    public static func + (a: Self, b: Self) -> Self {
        var sum = a
        sum.readCalls += b.readCalls
        sum.readWouldBlock += b.readWouldBlock
        sum.readEndOfStream += b.readEndOfStream
        sum.bytesRead += b.bytesRead
        sum.writeCalls += b.writeCalls
        sum.writeWouldBlock += b.writeWouldBlock
        sum.partialWrites += b.partialWrites
        sum.bytesWritten += b.bytesWritten
        sum.regionsWritten += b.regionsWritten
        sum.acceptCalls += b.acceptCalls
        sum.acceptWouldBlock += b.acceptWouldBlock
        sum.acceptPauses += b.acceptPauses
        sum.controlCalls += b.controlCalls
        return sum
    }
}
