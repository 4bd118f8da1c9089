import BraidQUIC
import Foundation

/// Deterministic pseudo-random numbers (SplitMix64) so every lossy run is reproducible.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func chance(_ probability: Double) -> Bool {
        probability > 0 && Double(next() >> 11) / Double(1 << 53) < probability
    }
}

/// What the in-memory wire does to each datagram.
struct LinkConditions {
    var oneWayDelay: Duration = .milliseconds(10)
    /// Extra random delay in 0..<jitter: with jitter > 0 datagrams overtake each other.
    var jitter: Duration = .zero
    var dropRate = 0.0
    var duplicateRate = 0.0
    var corruptRate = 0.0
    /// Drops everything (a blackhole) while true.
    var blackhole = false
}

/// Runs client connections and a server endpoint against each other over an in-memory wire
/// with a virtual clock: time jumps straight to the next delivery or timer, so seconds of
/// protocol time (idle timeouts, loss recovery) take milliseconds of test time.
final class SimulatedNetwork {
    struct InFlight {
        var deliverAt: QUICInstant
        var sequence: Int
        var from: QUICAddress
        var to: QUICAddress
        var bytes: [UInt8]
        var ecn: ECN
    }

    private(set) var now = QUICInstant(nanoseconds: 1_000_000_000)
    var conditions = LinkConditions()
    var random: SeededRandom
    let serverAddress = QUICAddress(ip: "127.0.0.1", port: 4433)!
    var server: QUICServerEndpoint?
    private(set) var serverConnections: [QUICConnection] = []
    private(set) var clients: [QUICAddress: QUICConnection] = [:]
    private var inFlight: [InFlight] = []
    private var sequence = 0
    private var nextClientPort: UInt16 = 50000
    /// Datagrams the wire dropped, by direction.
    private(set) var droppedToServer = 0
    private(set) var droppedToClients = 0
    private(set) var delivered = 0

    /// Called for every event of every connection, in order.
    var onEvent: (QUICConnection, QUICEvent) -> Void = { _, _ in }
    /// Called after each step: the place for application logic that is not event driven.
    var onStep: () -> Void = {}

    init(seed: UInt64 = 1, server: QUICServerEndpoint?) {
        random = SeededRandom(seed: seed)
        self.server = server
    }

    func newClientPath(ip: String = "127.0.0.2") -> QUICPath {
        defer { nextClientPort += 1 }
        return QUICPath(local: QUICAddress(ip: ip, port: nextClientPort)!, remote: serverAddress)
    }

    /// Moves the clock without delivering anything (the caller drives what it holds itself).
    func advance(by duration: Duration) { now = now + duration }

    /// Creates a client connection and registers it on the wire.
    @discardableResult
    func connect(
        _ context: QUICClientContext, serverName: String = "localhost", resumption: QUICResumptionTicket? = nil,
        fromIP ip: String = "127.0.0.2"
    ) throws -> QUICConnection {
        let path = newClientPath(ip: ip)
        let connection = try context.connect(path: path, serverName: serverName, resumption: resumption, now: now)
        clients[path.local] = connection
        return connection
    }

    var allConnections: [QUICConnection] { Array(clients.values) + serverConnections }

    /// Sends whatever every connection and the endpoint have to send now.
    func flush() {
        for connection in allConnections { write(connection) }
        if let server {
            // Timers, writes and application calls change routes outside `receive`.
            for connection in serverConnections { server.applyRoutingChanges(of: connection) }
            // Evicted connections are among `serverConnections`, written above.
            _ = server.pollEvictedConnections()
            for transmit in server.pollEndpointTransmits() { transmitOnWire(transmit) }
        }
    }

    /// Writes through the in-place interface the socket datapath uses, into memory the engine
    /// does not own (so packets held over to the next batch take the same route as there).
    func write(_ connection: QUICConnection) {
        let slot = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
        defer { slot.deallocate() }
        connection.writeTransmits(now: now, into: { slot }) { path, ecn, segmentSize, length in
            Transmit.forEachDatagram(in: UnsafeRawBufferPointer(rebasing: slot[0..<length]), segmentSize: segmentSize) {
                enqueue(from: path.local, to: path.remote, bytes: Array($0), ecn: ecn)
            }
        }
    }

    private func transmitOnWire(_ transmit: Transmit) {
        for datagram in transmit.datagrams {
            enqueue(from: transmit.path.local, to: transmit.path.remote, bytes: Array(datagram), ecn: transmit.ecn)
        }
    }

    private func enqueue(from: QUICAddress, to: QUICAddress, bytes: [UInt8], ecn: ECN) {
        if conditions.blackhole || random.chance(conditions.dropRate) {
            if to == serverAddress { droppedToServer += 1 } else { droppedToClients += 1 }
            return
        }
        var bytes = bytes
        if random.chance(conditions.corruptRate), !bytes.isEmpty {
            let index = Int(random.next() % UInt64(bytes.count))
            bytes[index] ^= UInt8(truncatingIfNeeded: random.next() | 1)
        }
        let copies = random.chance(conditions.duplicateRate) ? 2 : 1
        for _ in 0..<copies {
            var delay = conditions.oneWayDelay
            if conditions.jitter > .zero {
                let jitterNanos = UInt64(conditions.jitter.components.seconds) * 1_000_000_000
                    + UInt64(conditions.jitter.components.attoseconds / 1_000_000_000)
                delay += .nanoseconds(Int64(random.next() % max(jitterNanos, 1)))
            }
            sequence += 1
            inFlight.append(InFlight(deliverAt: now + delay, sequence: sequence, from: from, to: to, bytes: bytes, ecn: ecn))
        }
    }

    /// Advances to the next delivery or timer and processes everything due. False when idle.
    @discardableResult
    func step(notAfter limit: QUICInstant? = nil) -> Bool {
        let nextDelivery = inFlight.map(\.deliverAt).min()
        let nextTimer = allConnections.compactMap(\.nextDeadline).min()
        guard let next = [nextDelivery, nextTimer].compactMap({ $0 }).min() else { return false }
        if let limit, next > limit {
            // Nothing happens before the caller's horizon: just let the clock get there.
            now = max(now, limit)
            return true
        }
        now = max(now, next)
        // A timer that keeps firing at the same instant without traffic must not freeze the clock.
        if stalledSteps > 100 {
            now = now + .microseconds(100)
            stalledSteps = 0
        }

        let due = inFlight.filter { $0.deliverAt <= now }.sorted { ($0.deliverAt, $0.sequence) < ($1.deliverAt, $1.sequence) }
        inFlight.removeAll { $0.deliverAt <= now }
        for datagram in due { deliver(datagram) }
        for connection in allConnections {
            if let deadline = connection.nextDeadline, deadline <= now { connection.handleTimeout(now: now) }
        }
        stalledSteps = due.isEmpty && now == lastStepTime ? stalledSteps + 1 : 0
        lastStepTime = now
        drainEvents()
        onStep()
        drainEvents()
        flush()
        serverConnections.removeAll { $0.isTerminated }
        return true
    }

    private var stalledSteps = 0
    private var lastStepTime = QUICInstant(nanoseconds: 0)

    private func deliver(_ datagram: InFlight) {
        delivered += 1
        if ProcessInfo.processInfo.environment["BRAID_TRACE_WIRE"] != nil {
            FileHandle.standardError.write("WIRE \(now) \(datagram.from) -> \(datagram.to) \(datagram.bytes.count)\n".data(using: .utf8)!)
        }
        let path = QUICPath(local: datagram.to, remote: datagram.from)
        if datagram.to == serverAddress {
            guard let server else { return }
            if let connection = server.receive(datagram: datagram.bytes, path: path, ecn: datagram.ecn, now: now),
                connection.isNewlyAccepted
            {
                serverConnections.append(connection)
            }
        } else if let client = clients[datagram.to] {
            client.receive(datagram: datagram.bytes, path: path, ecn: datagram.ecn, now: now)
        }
    }

    private func drainEvents() {
        for connection in allConnections {
            while let event = connection.pollEvent() { onEvent(connection, event) }
        }
    }

    /// Steps until `done` holds; fails (returns false) if the network goes idle or `limit` of
    /// virtual time passes first.
    @discardableResult
    func run(for limit: Duration = .seconds(60), until done: () -> Bool) -> Bool {
        let deadline = now + limit
        flush()
        while !done() {
            guard now < deadline, step(notAfter: deadline) else { return done() }
        }
        return true
    }

    /// Steps until nothing is in flight and no timer is due within `quiet`.
    func settle(quiet: Duration = .seconds(1), limit: Duration = .seconds(60)) {
        let deadline = now + limit
        flush()
        while now < deadline {
            let nextDelivery = inFlight.map(\.deliverAt).min()
            let nextTimer = allConnections.compactMap(\.nextDeadline).min()
            if nextDelivery == nil, nextTimer.map({ $0 > now + quiet }) ?? true { return }
            step(notAfter: deadline)
        }
    }
}
