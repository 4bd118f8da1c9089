import BraidIO
import BraidWebSocketIO
import DequeModule
import Foundation

/// A custom framer over UDP, as a datagram layer in the connection's `DatagramChannel`: each
/// datagram from the peer is the framer's whole input for its `handleInput` (what the framer
/// leaves of it is dropped, and a message never takes bytes of the next datagram), and what
/// the framer writes while handling one message sent (`handleOutput`), or one datagram
/// received, or in one `async` block or wakeup pass, goes out as one datagram.
///
/// The framer runs in a `FramerLayer` (its callbacks, wakeups and `async` blocks as over a
/// byte stream), over a pass-through layer this one feeds one datagram at a time. Messages
/// travel above as over a byte stream, as TLV records numbered by the connection's
/// `FramerMessages`: each record is one message of the channel's inbox.
///
/// Bounds: `queueLimit` datagrams wait for the framer (more are dropped and counted, as the
/// channel drops any layer's overflow); a message sent is at most `maximumMessageSize`.
final class FramerDatagramLayer: DatagramLayer {
    /// A framer over plain UDP has no session for a peer to end.
    var peerClosed: Bool { false }

    /// Datagrams from the peer that wait for the framer's next pass.
    static let queueLimit = 64
    private static let recordHeaderSize = 8

    private let framer: FramerLayer
    private let inner = PlainByteStreamLayer(capacity: 2 * DatagramChannel.maximumPayloadIPv4)
    private var received = Deque<[UInt8]>()
    private var output = Deque<[UInt8]>()
    /// Record bytes the framer delivered and not yet passed up whole.
    private var records: [UInt8] = []
    private var ready = false
    let handshakeTimeout: Duration

    init(definition: NWProtocolFramer.Definition, maximumMessageSize: Int, messages: FramerMessages, loop: EventLoop, handshakeTimeout: Duration) {
        framer = FramerLayer(definition: definition, maximumMessageSize: maximumMessageSize, over: inner, messages: messages)
        framer.datagramMode = true
        framer.eventLoop = loop
        self.handshakeTimeout = handshakeTimeout
    }

    func start() throws {}

    func receive(_ datagram: UnsafeRawBufferPointer) -> Bool {
        guard received.count < Self.queueLimit else { return false }
        received.append(Array(datagram))
        return true
    }

    var requestProcessing: (@Sendable () -> Void)? {
        get { framer.requestProcessing }
        set { framer.requestProcessing = newValue }
    }

    /// A pass of the framer's own (its start, `async` blocks, a wakeup due), then one pass per
    /// datagram received, each ended as the datagram's end. A framer that marks itself ready
    /// later gets the datagrams of its own handshake meanwhile.
    func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> Bool {
        try pass(deliver)
        while let datagram = received.popFirst() {
            let fed = datagram.withUnsafeBytes { bytes in
                framer.withInputSpace(minimum: max(1, bytes.count)) { space in
                    space.copyMemory(from: bytes)
                    return bytes.count
                }
            }
            guard fed == datagram.count else { throw NetworkError.internalError("a framer's layer had no room for a datagram of \(datagram.count) bytes") }
            try pass(deliver)
            framer.endDatagram()
        }
        return ready
    }

    private func pass(_ deliver: (UnsafeRawBufferPointer) -> Void) throws {
        let events = try framer.process { records.append(contentsOf: $0) }
        if events.contains(.becameReady) { ready = true }
        deliverRecords(deliver)
        collectOutput()
    }

    /// Each whole record delivered so far, as one message above.
    private func deliverRecords(_ deliver: (UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        while records.count - offset >= Self.recordHeaderSize {
            let length = records[offset + 4 ..< offset + 8].reduce(0) { $0 << 8 | Int($1) }
            let end = offset + Self.recordHeaderSize + length
            guard end <= records.count else { break }
            records.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[offset ..< end])) }
            offset = end
        }
        records.removeFirst(offset)
    }

    /// What the framer wrote since the last call: one datagram.
    private func collectOutput() {
        var datagram: [UInt8] = []
        while framer.pendingOutputCount > 0 {
            let taken = framer.withPendingOutput { bytes in
                datagram.append(contentsOf: bytes)
                return bytes.count
            }
            if taken == 0 { break }
        }
        if !datagram.isEmpty { output.append(datagram) }
    }

    /// One message from above (a TLV record: its number in the connection's table, its
    /// length, its content): the framer's `handleOutput` writes it, as one datagram.
    func seal(_ message: UnsafeRawBufferPointer) throws {
        let taken = try framer.send(message)
        guard taken == message.count else { throw NetworkError.internalError("a framer's layer took \(taken) of a message's \(message.count) bytes") }
        try framer.seal()
        collectOutput()
    }

    var maximumMessageSize: Int { DatagramChannel.maximumPayloadIPv4 + Self.recordHeaderSize }

    func popOutput() -> [UInt8]? { output.popFirst() }

    /// The framer's wakeups are timers of its own on the loop.
    var timeout: Duration? { nil }

    /// Datagrams waiting for the framer, messages parsed and not yet delivered, and datagrams
    /// waiting to be sent (each queue bounded by `queueLimit` entries).
    var bufferedBytes: Int {
        received.reduce(0) { $0 + $1.count } + records.count + output.reduce(0) { $0 + $1.count }
    }

    func close() {
        framer.close()
        collectOutput()
    }

    var negotiatedALPN: String? { nil }
    var securityFacts: SecurityFacts? { nil }
}
