import BraidIO
import BraidQUIC
import BraidQUICIO
import Foundation

extension QUIC {
    /// Which way a stream carries data.
    public enum Directionality: Sendable, Hashable {
        /// Both sides send and receive.
        case bidirectional
        /// Only the side that opened the stream sends.
        case unidirectional
    }

    /// Which side opened a stream.
    public enum Initiator: Sendable, Hashable {
        /// This side opened the stream.
        case local
        /// The peer opened the stream.
        case remote
    }

    /// Per-receive information: whether the content ends the stream.
    public typealias StreamMetadata = Braid.StreamMetadata
}

/// Transport counters of a QUIC connection.
public struct NetworkConnectionStatistics: Sendable, Hashable {
    /// Smoothed round-trip time estimate (RFC 9002 §5.3).
    public var smoothedRTT: Duration
    /// Smallest round-trip time sample so far.
    public var minimumRTT: Duration
    /// The most recent round-trip time sample.
    public var latestRTT: Duration
    /// Bytes the congestion controller lets be in flight now.
    public var congestionWindow: UInt64
    /// Bytes sent and neither acknowledged nor declared lost.
    public var bytesInFlight: UInt64
    /// UDP datagrams sent (each may hold several coalesced QUIC packets).
    public var packetsSent: UInt64
    /// UDP payload bytes sent, after encryption.
    public var bytesSent: UInt64
    /// UDP datagrams received for this connection.
    public var packetsReceived: UInt64
    /// UDP payload bytes received, before decryption.
    public var bytesReceived: UInt64
    /// RFC 9221 datagrams declared lost, or dropped unsent because they no longer fit the
    /// path's packets (after a migration to a path with smaller packets).
    public var datagramsLost: UInt64
    /// `sendmsg` calls on the connection's socket. This and the next three count only for
    /// client connections: a listener's connections share its sockets, so theirs are zero.
    public var sendmsgCalls: UInt64
    /// `sendmmsg` calls (several datagrams per call) on the connection's socket.
    public var sendmmsgCalls: UInt64
    /// `recvmsg` calls on the connection's socket.
    public var recvmsgCalls: UInt64
    /// `recvmmsg` calls (several datagrams per call) on the connection's socket.
    public var recvmmsgCalls: UInt64
    /// Times the connection moved to a new path (RFC 9000 §9): by `migrate()`, or by itself
    /// when the interface or address it used went away.
    public var migrations: UInt64
}

extension NetworkConnection where ApplicationProtocol == QUIC {
    /// Opens a stream, waiting for the handshake (or sending in 0-RTT when resuming) and for
    /// the peer's stream limit.
    ///
    /// ```swift
    /// let stream = try await connection.openStream(directionality: .unidirectional)
    /// try await stream.send(Data("log line".utf8), endOfStream: true)
    /// ```
    public func openStream(directionality: QUICStream.Directionality = .bidirectional) async throws -> QUIC.Stream<QUICStream> {
        QUIC.Stream(try await openStreamHandle(directionality), stack: QUICStream())
    }

    /// Opens a stream with a framer on it, as Network.framework's
    /// `openStream(directionality:_:)`: the closure gets the stream's `QUICStream` and puts
    /// `TLV` or `Coder` on it, and the stream sends and receives whole messages.
    ///
    /// ```swift
    /// let stream = try await connection.openStream { quicStream in
    ///     Coder(String.self, using: .json) { quicStream }
    /// }
    /// try await stream.send("hello")
    /// let reply = try await stream.receive().content
    /// ```
    ///
    /// The stream's messages are framed as on a TLS or TCP connection (`TLVFraming`), with the
    /// framer's `maximumMessageSize`. A peer announcing more makes the receive throw
    /// `NetworkError.messageTooLarge`, and the stream, not the connection, ends: it is reset
    /// and stopped with `QUICStream.messageTooLargeErrorCode`, and its later calls throw the
    /// same error. A stack other than a framer over the closure's `QUICStream` (or the
    /// `QUICStream` itself) throws `NetworkError.unsupported` before a stream is opened.
    public func openStream<NewApplicationProtocol: NetworkProtocol>(
        directionality: QUICStream.Directionality = .bidirectional,
        @ProtocolStackBuilder _ prepending: (QUICStream) -> NewApplicationProtocol
    ) async throws -> QUIC.Stream<NewApplicationProtocol> {
        let stack = prepending(QUICStream())
        try QUIC.Stream<NewApplicationProtocol>.validate(stack)
        return QUIC.Stream(try await openStreamHandle(directionality), stack: stack)
    }

    private func openStreamHandle(_ directionality: QUICStream.Directionality) async throws -> QUICStreamHandle {
        start()
        let core = core
        return try await NetworkError.mapping {
            try await Completion<QUICStreamHandle>.wait(on: loop) { context, completion in
                core.value.quic.openStream(bidirectional: directionality == .bidirectional, context: context, completion: completion)
            }
        }
    }

    /// Calls `handler` for every stream the peer opens, each in its own child task, until the
    /// connection ends (or the calling task is cancelled). Returns when all handlers are done.
    /// Call it from one task at a time: the streams are handed out once.
    ///
    /// ```swift
    /// try await connection.inboundStreams { stream in
    ///     let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
    ///     try await stream.send(request, endOfStream: true)
    /// }
    /// ```
    public func inboundStreams(_ handler: @escaping @Sendable (QUIC.Stream<QUICStream>) async throws -> Void) async throws {
        try await inboundStreams(prepending: { $0 }, handler)
    }

    /// Like `inboundStreams(_:)`, with a framer on every stream the peer opens, as
    /// Network.framework's `inboundStreams(prepending:_:)`: the closure gets each stream's
    /// `QUICStream` and puts `TLV` or `Coder` on it, and `handler` gets a stream of whole
    /// messages.
    ///
    /// ```swift
    /// try await connection.inboundStreams(prepending: { quicStream in TLV { quicStream } }) { stream in
    ///     for try await (content, metadata) in stream.messages {
    ///         try await stream.send(content, type: metadata.type)
    ///     }
    /// }
    /// ```
    ///
    /// Framing, limits and errors are those of `openStream(directionality:_:)`. A stack other
    /// than a framer over the closure's `QUICStream` throws `NetworkError.unsupported` at once.
    public func inboundStreams<NewApplicationProtocol: NetworkProtocol>(
        @ProtocolStackBuilder prepending: @escaping (QUICStream) -> NewApplicationProtocol,
        _ handler: @escaping @Sendable (QUIC.Stream<NewApplicationProtocol>) async throws -> Void
    ) async throws {
        // Every stream gets the same stack: a value, made once.
        let stack = prepending(QUICStream())
        try QUIC.Stream<NewApplicationProtocol>.validate(stack)
        start()
        try await withThrowingDiscardingTaskGroup { group in
            for await handle in shared.quic.inboundStreams {
                let stream = QUIC.Stream(handle, stack: stack)
                group.addTask { try await handler(stream) }
            }
        }
    }

    /// RFC 9221 datagrams: `send` them, and iterate to receive them.
    public var datagrams: QUIC.Datagrams {
        start()
        return QUIC.Datagrams(loop: loop, core: core, shared: shared.quic)
    }

    /// The application protocol both ends agreed on: set once ready, and on a server already
    /// when the first stream of the peer arrives (which may be in 0-RTT, before ready).
    public var negotiatedALPN: String? { shared.snapshot.withLock { $0.negotiatedALPN } }

    /// The largest datagram payload that fits in one packet, once ready (nil: datagrams off).
    public var usableDatagramFrameSize: Int? { shared.snapshot.withLock { $0.usableDatagramFrameSize } }

    /// True if the server accepted this resumed connection's 0-RTT data (set once ready).
    public var earlyDataAccepted: Bool { shared.snapshot.withLock { $0.earlyDataAccepted } }

    /// Moves the connection to a new local port (a new UDP socket), as after a network change
    /// or a NAT rebinding; streams and datagrams carry on (QUIC connection migration, RFC 9000
    /// §9). `localEndpoint` shows the new port. Client connections only, once ready.
    ///
    /// ```swift
    /// try await connection.migrate()
    /// print(connection.localEndpoint!)
    /// ```
    public func migrate() async throws {
        let core = core
        try await loop.submit { context in
            do { try core.value.migrate(context: context) } catch { throw NetworkError(error) }
        }
    }

    /// The connection's transport counters now (nil before it has a socket).
    public var statistics: NetworkConnectionStatistics? {
        get async {
            let core = core
            return try? await loop.submit { _ in core.value.publicStatistics }
        }
    }
}

extension ConnectionCore {
    var publicStatistics: NetworkConnectionStatistics? {
        guard let engine = quic.statistics else { return nil }
        let socket = quic.socketCounters ?? SocketCounters()
        return NetworkConnectionStatistics(
            smoothedRTT: engine.smoothedRTT, minimumRTT: engine.minRTT, latestRTT: engine.latestRTT,
            congestionWindow: engine.congestionWindow, bytesInFlight: engine.bytesInFlight, packetsSent: engine.packetsSent,
            bytesSent: engine.bytesSent, packetsReceived: engine.packetsReceived, bytesReceived: engine.bytesReceived,
            datagramsLost: engine.datagramsLost + quic.datagramsDroppedBeforeEngine, sendmsgCalls: socket.sendmsgCalls, sendmmsgCalls: socket.sendmmsgCalls,
            recvmsgCalls: socket.recvmsgCalls, recvmmsgCalls: socket.recvmmsgCalls, migrations: migrations)
    }
}

extension QUIC {
    /// A QUIC stream: an ordered, reliable byte stream within a connection, in one or both
    /// directions. It ends with its connection. A plain stream (`QUIC.Stream<QUICStream>`,
    /// from `openStream()` and `inboundStreams { }`) sends and receives bytes; a stream with a
    /// framer (`QUIC.Stream<TLV>`, `QUIC.Stream<Coder<...>>`, from `openStream { }` and
    /// `inboundStreams(prepending:)`) sends and receives whole messages.
    ///
    /// ```swift
    /// try await stream.send(UInt32(5))                    // network byte order
    /// try await stream.send(Data("hello".utf8), endOfStream: true)
    /// let length = try await stream.receive(as: UInt32.self).content
    /// let (body, metadata) = try await stream.receive(exactly: Int(length))
    /// ```
    public final class Stream<ApplicationProtocol: NetworkProtocol>: Sendable {
        let bound: LoopBound<QUICStreamChannel>
        /// What the application's tasks send into and receive from.
        let end: ByteStreamEnd
        /// The stream's stack: `QUICStream`, or a framer on it.
        let stack: ApplicationProtocol
        /// The message decoder of a framed stream (nil for a plain one).
        let messageReceiver: MessageReceiver?
        /// The QUIC stream ID (RFC 9000 §2.1).
        public let streamID: Int64
        /// Whether both sides send on the stream, or only its initiator.
        public let directionality: Directionality
        /// Whether this side or the peer opened the stream.
        public let initiator: Initiator

        /// The facade of a stream whose loop made `handle`, with `stack` on it (checked by
        /// `validate`).
        init(_ handle: QUICStreamHandle, stack: ApplicationProtocol) {
            let bound = handle.channel
            self.bound = bound
            self.stack = stack
            end = ByteStreamEnd(
                inbox: handle.inbox, outbox: handle.outbox,
                postPump: { bound.loop.execute { context in bound.value.pump(context) } },
                postCreditPass: { bound.loop.execute { context in bound.value.returnConsumedCredit(context) } })
            messageReceiver = (stack as? any MessageFramedStack).map { MessageReceiver(maximumMessageSize: $0.maximumMessageSize) }
            streamID = handle.id
            directionality = handle.isBidirectional ? .bidirectional : .unidirectional
            initiator = handle.locallyInitiated ? .local : .remote
        }

        /// Throws `unsupported` unless `stack` is the stream itself or a framer on it.
        static func validate(_ stack: ApplicationProtocol) throws {
            if stack is QUICStream { return }
            if let framed = stack as? any MessageFramedStack, case .quicStream = framed.framedLower { return }
            throw NetworkError.unsupported(
                "\(ApplicationProtocol.self) prepended to a QUIC stream; a framer on the stream is implemented: openStream { stream in TLV { stream } }")
        }

        var loop: EventLoop { bound.loop }

        // MARK: Aborting

        /// Abandons sending with RESET_STREAM and this application error code.
        public func reset(streamApplicationErrorCode code: UInt64) async throws {
            let bound = bound
            try await loop.submit { context in
                do { try bound.value.reset(code: code, context: context) } catch { throw NetworkError(error) }
            }
        }

        /// Asks the peer to stop sending (STOP_SENDING) with this application error code.
        public func stopSending(streamApplicationErrorCode code: UInt64) async throws {
            let bound = bound
            try await loop.submit { context in
                do { try bound.value.stopSending(code: code, context: context) } catch { throw NetworkError(error) }
            }
        }

        // MARK: Direction checks

        /// The stream's end for sending, if this side may send on it.
        func writableEnd() throws -> ByteStreamEnd {
            guard directionality == .bidirectional || initiator == .local else { throw NetworkError.streamNotWritable }
            return end
        }

        /// The stream's end for receiving, if this side may read it.
        func readableEnd() throws -> ByteStreamEnd {
            guard directionality == .bidirectional || initiator == .remote else { throw NetworkError.streamNotReadable }
            return end
        }
    }
}

extension QUIC.Stream where ApplicationProtocol == QUICStream {
    // MARK: Sending

    /// Sends `content`; with `endOfStream`, finishes the stream (FIN) after it. Returns once
    /// the stream has taken all of it: at once for up to 64 KiB that fit under the stream's
    /// bound (`streamSendBufferLimit`), else once the engine has the bytes, waiting for
    /// acknowledgements at the bound. At the connection's bound (`connectionSendBufferLimit`,
    /// all streams together) it waits, before copying `content`, until acknowledgements free
    /// room; waiting sends get it in turn. Before the handshake completes it waits too: use
    /// `sendIdempotent` for data that may go in 0-RTT.
    public func send<Content: Collection & Sendable>(_ content: Content, endOfStream: Bool = false) async throws
    where Content.Element == UInt8 {
        try await writableEnd().send(copying: content, endOfStream: endOfStream, idempotent: false)
    }

    /// Sends an integer in network byte order.
    public func send<Integer: FixedWidthInteger & Sendable>(_ value: Integer) async throws {
        try await send(ByteStreamEnd.bytes(of: value), endOfStream: false, idempotent: false)
    }

    /// Like `send`, but the bytes may travel in 0-RTT on a resumed connection. An attacker
    /// can replay 0-RTT data, so send only requests that are safe to repeat.
    public func sendIdempotent<Content: Collection & Sendable>(_ content: Content, endOfStream: Bool = false) async throws
    where Content.Element == UInt8 {
        try await writableEnd().send(copying: content, endOfStream: endOfStream, idempotent: true)
    }

    private func send(_ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool) async throws {
        try await writableEnd().send(bytes, endOfStream: endOfStream, idempotent: idempotent)
    }

    // MARK: Receiving

    /// Exactly `count` bytes; throws `unexpectedEndOfStream` if the stream ends first.
    public func receive(exactly count: Int) async throws -> (content: Data, metadata: StreamMetadata) {
        try await readableEnd().receive(exactly: count)
    }

    /// Between `minimum` and `maximum` bytes; fewer than `minimum` only at the end of the
    /// stream (`metadata.isEndOfStream`, possibly with empty content).
    public func receive(atLeast minimum: Int = 1, atMost maximum: Int) async throws -> (content: Data, metadata: StreamMetadata) {
        try await readableEnd().receive(atLeast: minimum, atMost: maximum)
    }

    /// An integer sent in network byte order, with the receive's metadata (Apple's shape:
    /// `try await stream.receive(as: UInt32.self).content`).
    public func receive<Integer: FixedWidthInteger & Sendable>(
        as type: Integer.Type
    ) async throws -> (content: Integer, metadata: StreamMetadata) {
        try await readableEnd().receive(as: type)
    }
}

extension QUIC {
    /// The RFC 9221 datagrams of a connection: unreliable, unordered messages that each fit in
    /// one packet (`usableDatagramFrameSize`).
    ///
    /// ```swift
    /// try await connection.datagrams.send(Data([1, 2, 3]))
    /// for await datagram in connection.datagrams { print(datagram.count) }
    /// ```
    public struct Datagrams: AsyncSequence, Sendable {
        /// One received datagram's payload.
        public typealias Element = Data
        let loop: EventLoop
        let core: LoopBound<ConnectionCore>
        let shared: QUICShared

        /// Queues one datagram (waits for the handshake). Throws `datagramTooLarge` rather
        /// than dropping it.
        ///
        /// Once the connection is ready, `send` returns as soon as the datagram is queued; it
        /// waits only while 256 datagrams are already queued. Datagrams sent in a burst (from
        /// one task or several) go out together: one pass of the connection's event loop
        /// packs them into packets and writes them with as few system calls as batching allows.
        public func send<Content: Collection & Sendable>(_ content: Content) async throws where Content.Element == UInt8 {
            try await send(Data(content))
        }

        /// Queues one datagram; see `send(_:)` for collections of bytes.
        public func send(_ bytes: Data) async throws {
            try await NetworkError.mapping { try await queue(bytes) }
        }

        private func queue(_ bytes: Data) async throws {
            if Task.isCancelled { throw NetworkError.cancelled }
            let outbox = shared.datagramOutbox
            while true {
                switch outbox.offer(bytes) {
                case .queued:
                    return
                case .queuedDrainNeeded:
                    let core = core
                    loop.execute { context in core.value.quic.sendQueuedDatagrams(context) }
                    return
                case .full:
                    try await outbox.waitForRoom()
                case .needsLoop:
                    let core = core
                    try await Completion<Void>.wait(on: loop) { context, completion in
                        core.value.quic.sendDatagram(bytes, context: context, completion: completion)
                    }
                    return
                case .failed(let error):
                    throw error
                }
            }
        }

        /// Iterates over received datagrams, oldest first.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let batch: DatagramBatch
            /// The next datagram, waiting for one; nil once the connection has ended and the
            /// queued datagrams are read, or when the task is cancelled.
            public mutating func next() async -> Data? {
                if let datagram = batch.takeQueued() { return datagram }
                return await batch.next()
            }
        }

        /// Received datagrams until the connection ends. Datagrams nobody reads are kept up to
        /// a bound (4,096), then the oldest are dropped. Several iterators may read at once;
        /// each datagram goes to one of them.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(batch: DatagramBatch(inbox: shared.datagramInbox)) }
    }
}
