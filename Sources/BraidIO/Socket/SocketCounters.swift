/// What one socket did, counted at each system call: a UDP socket, a TCP connection or a TCP
/// listener, so a connection's system-call cost is exact whatever its stack (calls that end in
/// EAGAIN are counted too; they cost as much as the others). Each kind fills the counters of the
/// calls it makes and leaves the others at zero. Public as `SocketStatistics` with the
/// datagram counters its users read; a stream socket's own counters are the package's.
public struct SocketCounters: Sendable, Hashable {
    /// sendmsg calls: a UDP socket's single sends, a TCP socket's gathered writes (writev with
    /// MSG_NOSIGNAL).
    public var sendmsgCalls: UInt64 = 0
    public var sendmmsgCalls: UInt64 = 0
    public var recvmsgCalls: UInt64 = 0
    public var recvmmsgCalls: UInt64 = 0
    /// UDP datagrams as they travel on the wire (a GSO send of 40 segments counts 40).
    public var datagramsSent: UInt64 = 0
    public var datagramsReceived: UInt64 = 0
    public var bytesSent: UInt64 = 0
    public var bytesReceived: UInt64 = 0
    /// Messages sent with UDP_SEGMENT and the segments they carried.
    public var gsoBatches: UInt64 = 0
    public var gsoSegments: UInt64 = 0
    /// Received messages the kernel had coalesced (GRO) and the segments they carried.
    public var groMessages: UInt64 = 0
    public var groSegments: UInt64 = 0
    /// Received messages cut short by a too-small slot (dropped, never passed on).
    public var truncatedMessages: UInt64 = 0
    /// Received datagrams carrying an ECN mark (ECT(0), ECT(1) or CE).
    public var ecnMarkedReceived: UInt64 = 0
    /// Sends that failed (the datagrams are lost; QUIC recovers) and GSO fallbacks.
    public var sendErrors: UInt64 = 0
    public var gsoFallbacks: UInt64 = 0

    /// A TCP socket's recv calls, of which `readWouldBlock` found nothing and `readEndOfStream`
    /// found the end.
    package var recvCalls: UInt64 = 0
    package var readWouldBlock: UInt64 = 0
    package var readEndOfStream: UInt64 = 0
    /// A TCP socket's writes (`sendmsgCalls`) that wrote nothing, and that wrote less than
    /// offered.
    package var writeWouldBlock: UInt64 = 0
    package var partialWrites: UInt64 = 0
    /// Regions handed to the kernel across all writes (a write of 3 regions counts 3).
    package var regionsWritten: UInt64 = 0
    /// accept4 calls (listeners), of which `acceptWouldBlock` found no connection.
    package var acceptCalls: UInt64 = 0
    package var acceptWouldBlock: UInt64 = 0
    /// Accepts that hit the descriptor or memory limit (EMFILE, ENFILE, ENOBUFS, ENOMEM), each
    /// followed by a pause of the listener's read interest.
    package var acceptPauses: UInt64 = 0
    /// Every other system call of a TCP socket or listener: socket, setsockopt, getsockopt,
    /// bind, listen, connect, getsockname, shutdown, close.
    package var controlCalls: UInt64 = 0

    public init() {}

    /// Socket system calls issued (send and receive, including those that found nothing; for
    /// TCP also accept and the others).
    public var syscalls: UInt64 {
        sendmsgCalls + sendmmsgCalls + recvmsgCalls + recvmmsgCalls + recvCalls + acceptCalls + controlCalls
    }

    public static func + (a: Self, b: Self) -> Self {
        var sum = a
        sum.sendmsgCalls += b.sendmsgCalls
        sum.sendmmsgCalls += b.sendmmsgCalls
        sum.recvmsgCalls += b.recvmsgCalls
        sum.recvmmsgCalls += b.recvmmsgCalls
        sum.datagramsSent += b.datagramsSent
        sum.datagramsReceived += b.datagramsReceived
        sum.bytesSent += b.bytesSent
        sum.bytesReceived += b.bytesReceived
        sum.gsoBatches += b.gsoBatches
        sum.gsoSegments += b.gsoSegments
        sum.groMessages += b.groMessages
        sum.groSegments += b.groSegments
        sum.truncatedMessages += b.truncatedMessages
        sum.ecnMarkedReceived += b.ecnMarkedReceived
        sum.sendErrors += b.sendErrors
        sum.gsoFallbacks += b.gsoFallbacks
        sum.recvCalls += b.recvCalls
        sum.readWouldBlock += b.readWouldBlock
        sum.readEndOfStream += b.readEndOfStream
        sum.writeWouldBlock += b.writeWouldBlock
        sum.partialWrites += b.partialWrites
        sum.regionsWritten += b.regionsWritten
        sum.acceptCalls += b.acceptCalls
        sum.acceptWouldBlock += b.acceptWouldBlock
        sum.acceptPauses += b.acceptPauses
        sum.controlCalls += b.controlCalls
        return sum
    }
}
