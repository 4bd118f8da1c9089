import BraidHTTP3

/// Two HTTP/3 engines joined by in-memory streams: every write goes into a per-stream buffer
/// for the other side, and is delivered byte-exact in pieces of random sizes (a seeded
/// generator, so runs repeat). Resets, STOP_SENDING and connection closes cross over as the
/// QUIC layer would carry them; each side closes a stream once both its directions ended.
/// No flow control: that is the QUIC harness's part.
final class HTTP3Pipe {
    enum Side: Hashable { case client, server }

    struct Buffer {
        /// Bytes written; those before `start` are delivered (dropped once they are many).
        var bytes: [UInt8] = []
        var start = 0
        var fin = false
        var finDelivered = false

        var pending: Int { bytes.count - start }

        mutating func take(_ count: Int) -> [UInt8] {
            let piece = Array(bytes[start..<start + count])
            start += count
            if start >= 1 << 20 && start * 2 >= bytes.count {
                bytes.removeFirst(start)
                start = 0
            }
            return piece
        }
    }

    let client: HTTP3Connection
    let server: HTTP3Connection
    let clientApp = HTTP3TestApp()
    let serverApp = HTTP3TestApp()
    var random: SeededRandom
    /// The largest piece delivered or written at once.
    var maxPiece: Int
    /// Buffers in flight to the side named by the key.
    private var inFlight: [Side: [Int64: Buffer]] = [.client: [:], .server: [:]]
    /// Streams whose delivery to the server is held back (to make requests arrive late).
    var heldToServer: Set<Int64> = []
    private var sendDone: [Side: Set<Int64>] = [.client: [], .server: [], ]
    private var receiveDone: [Side: Set<Int64>] = [.client: [], .server: []]
    private var closed: [Side: Set<Int64>] = [.client: [], .server: []]
    /// Connection closes each side asked for, with its code.
    private(set) var closes: [Side: HTTP3ErrorCode] = [:]
    /// Every transport action, by the side that asked for it.
    private(set) var actions: [Side: [HTTP3TransportAction]] = [.client: [], .server: []]
    private var nextRequestStream: Int64 = 0

    /// Called with every write an engine makes, before its bytes go into the pipe.
    var onWrite: (Side, HTTP3StreamWrite) -> Void = { _, _ in }

    init(
        seed: UInt64 = 1, maxPiece: Int = 1500,
        client clientConfiguration: HTTP3Configuration = HTTP3Configuration(),
        server serverConfiguration: HTTP3Configuration = HTTP3Configuration()
    ) throws {
        random = SeededRandom(seed: seed)
        self.maxPiece = maxPiece
        client = try HTTP3Connection(
            role: .client, localStreams: HTTP3LocalStreams(control: 2, qpackEncoder: 6, qpackDecoder: 10), configuration: clientConfiguration)
        server = try HTTP3Connection(
            role: .server, localStreams: HTTP3LocalStreams(control: 3, qpackEncoder: 7, qpackDecoder: 11), configuration: serverConfiguration)
    }

    func engine(_ side: Side) -> HTTP3Connection { side == .client ? client : server }
    func app(_ side: Side) -> HTTP3TestApp { side == .client ? clientApp : serverApp }
    static func other(_ side: Side) -> Side { side == .client ? .server : .client }

    /// The next client-initiated bidirectional stream (as the QUIC layer would open it).
    func openRequestStream() -> Int64 {
        defer { nextRequestStream += 4 }
        return nextRequestStream
    }

    /// Sends a request on a new stream and returns its ID.
    @discardableResult
    func request(_ fields: [HTTP3Field], body: HTTP3BodySource? = nil) throws -> Int64 {
        let id = openRequestStream()
        try client.sendRequest(streamID: id, fields: fields, body: body)
        return id
    }

    /// Raw bytes from one side on a stream, as if its QUIC layer sent them (for hostile input).
    func inject(from side: Side, streamID: Int64, bytes: [UInt8], fin: Bool = false) {
        inFlight[Self.other(side)]![streamID, default: Buffer()].bytes.append(contentsOf: bytes)
        if fin { inFlight[Self.other(side)]![streamID]!.fin = true }
    }

    /// One round: both sides write, deliver a piece of every stream, act and hear events.
    /// Returns whether anything moved.
    @discardableResult
    func step() -> Bool {
        var moved = false
        for side in [Side.client, .server] where closes.isEmpty {
            moved = write(side) || moved
        }
        for side in [Side.client, .server] where closes.isEmpty {
            moved = deliver(to: side) || moved
        }
        for side in [Side.client, .server] {
            moved = act(side) || moved
        }
        for side in [Side.client, .server] {
            let events = engine(side).takeEvents()
            for event in events { app(side).handle(event, engine: engine(side)) }
            moved = moved || !events.isEmpty
        }
        closeFinishedStreams()
        return moved
    }

    /// Steps until `done` holds or nothing moves; returns `done()`.
    @discardableResult
    func run(maxSteps: Int = 1_000_000, until done: () -> Bool = { false }) -> Bool {
        for _ in 0..<maxSteps {
            if done() { return true }
            if !step() { return done() }
        }
        return done()
    }

    /// Bytes a side may write per round: the stand-in for the QUIC layer's room, so an
    /// endless body cannot hold a round forever.
    var writeBudgetPerStep = 64 * 1024

    private func write(_ side: Side) -> Bool {
        var moved = false
        var budget = writeBudgetPerStep
        while budget > 0, let write = engine(side).nextWrite(maxBytes: min(budget, Int.random(in: 1...maxPiece, using: &random))) {
            moved = true
            budget -= max(write.count, 1)
            onWrite(side, write)
            // Mutated in place: a copy of a long buffer per write would cost quadratic time.
            inFlight[Self.other(side)]![write.streamID, default: Buffer()].bytes.append(contentsOf: write.bytes)
            if write.fin {
                inFlight[Self.other(side)]![write.streamID]!.fin = true
                sendDone[side]!.insert(write.streamID)
            }
        }
        return moved
    }

    private func deliver(to side: Side) -> Bool {
        var moved = false
        for id in inFlight[side]!.keys.sorted() {
            if side == .server && heldToServer.contains(id) { continue }
            // Only the scalars are read out: holding the buffer would make `take` copy it.
            let (pending, finWritten, finDelivered) = inFlight[side]![id].map { ($0.pending, $0.fin, $0.finDelivered) }!
            guard pending > 0 || (finWritten && !finDelivered) else { continue }
            let count = min(pending, Int.random(in: 1...maxPiece, using: &random))
            let piece = inFlight[side]![id]!.take(count)
            let fin = finWritten && pending == count
            if fin {
                inFlight[side]![id]!.finDelivered = true
                receiveDone[side]!.insert(id)
            }
            engine(side).receive(streamID: id, bytes: piece, fin: fin)
            moved = true
        }
        return moved
    }

    private func act(_ side: Side) -> Bool {
        let taken = engine(side).takeTransportActions()
        actions[side]!.append(contentsOf: taken)
        let peer = Self.other(side)
        for action in taken {
            switch action {
            case .returnCredit:
                break
            case .stopSending(let id, let code):
                receiveDone[side]!.insert(id)
                inFlight[side]![id] = nil
                // The peer's QUIC layer answers STOP_SENDING with RESET_STREAM.
                engine(peer).peerStoppedSending(streamID: id, code: code.code)
                if !sendDone[peer]!.contains(id) {
                    sendDone[peer]!.insert(id)
                    engine(side).peerResetStream(streamID: id, code: code.code)
                }
            case .resetStream(let id, let code):
                // A reset after the peer has every byte and the FIN changes nothing.
                if let buffer = inFlight[peer]![id], buffer.finDelivered { continue }
                sendDone[side]!.insert(id)
                inFlight[peer]![id] = nil
                receiveDone[peer]!.insert(id)
                engine(peer).peerResetStream(streamID: id, code: code.code)
            case .closeConnection(let code, let reason):
                closes[side] = code
                engine(peer).peerClosedConnection(code: code.code, reason: reason)
            }
        }
        return !taken.isEmpty
    }

    private func closeFinishedStreams() {
        for side in [Side.client, .server] {
            for id in sendDone[side]!.intersection(receiveDone[side]!).subtracting(closed[side]!) where id & 2 == 0 {
                closed[side]!.insert(id)
                engine(side).streamClosed(streamID: id)
            }
        }
    }
}
