import BraidIO
import BraidQUIC
import Logging

/// Runs a QUIC server endpoint on an event loop: one UDP socket, every connection the
/// endpoint accepts, a timer for each.
///
/// ```swift
/// let server = try QUICServerDriver(
///     context: context, endpoint: QUICServerEndpoint(configuration: configuration),
///     bindTo: QUICAddress(ip: "0.0.0.0", port: 4433)!) { connection, event in print(event) }
/// ```
package final class QUICServerDriver: LoopHandler {
    package let endpoint: QUICServerEndpoint
    package let socket: any DatagramSocket
    package var onEvent: QUICEventHandler
    /// Connections alive now.
    package var connections: [QUICConnection] { slots.values.map(\.connection) }
    private var token: UInt64 = 0
    private var slots: [ObjectIdentifier: ServerConnectionTimer] = [:]
    /// Connections touched by the current batch, serviced once it is processed.
    private var dirty: [ServerConnectionTimer] = []
    private var writeBlocked = false
    private var isServicing = false
    private var isClosed = false
    private var heapTrim = HeapTrimPolicy()

    /// A server connection's timer registration.
    final class ServerConnectionTimer: LoopHandler {
        let connection: QUICConnection
        unowned let server: QUICServerDriver
        var timerToken: UInt64 = 0
        var isDirty = false

        init(connection: QUICConnection, server: QUICServerDriver) {
            self.connection = connection
            self.server = server
        }

        func readable(_ context: LoopContext) {}
        func writable(_ context: LoopContext) {}
        func close(_ context: LoopContext) {}
        func timerFired(_ context: LoopContext) {
            connection.handleTimeout(now: context.now)
            server.markDirty(self)
            server.serviceDirty(context)
        }
    }

    package convenience init(
        context: LoopContext, endpoint: QUICServerEndpoint, bindTo address: QUICAddress, batching: BatchingOptions = .all,
        receiveSlots: Int = 32, reusePort: Bool = false, onEvent: @escaping QUICEventHandler
    ) throws {
        try self.init(
            context: context, endpoint: endpoint, bindTo: address, batching: batching, receiveSlots: receiveSlots,
            reusePort: reusePort, sockets: UDPSockets(), onEvent: onEvent)
    }

    /// As above, with its socket from `sockets` (an in-memory network, in tests).
    package init(
        context: LoopContext, endpoint: QUICServerEndpoint, bindTo address: QUICAddress, batching: BatchingOptions = .all,
        receiveSlots: Int = 32, reusePort: Bool = false, sockets: any DatagramSocketFactory, onEvent: @escaping QUICEventHandler
    ) throws {
        self.endpoint = endpoint
        socket = try sockets.bind(address, batching: batching, receiveSlots: receiveSlots, sendBatches: 16, reusePort: reusePort)
        self.onEvent = onEvent
        token = try socket.register(self, in: context)
    }

    /// The system calls, datagrams and bytes of the driver's socket.
    package var socketCounters: SocketCounters { socket.counters }

    package var localAddress: QUICAddress { socket.localAddress }

    fileprivate func markDirty(_ slot: ServerConnectionTimer) {
        guard !slot.isDirty else { return }
        slot.isDirty = true
        dirty.append(slot)
    }

    /// Sends what `connection` has to send; call after acting on it from loop code (inside
    /// `onEvent` it only marks the connection; the running pass writes it).
    package func service(_ connection: QUICConnection, _ context: LoopContext) {
        guard let slot = slots[ObjectIdentifier(connection)] else { return }
        markDirty(slot)
        serviceDirty(context)
    }

    fileprivate func serviceDirty(_ context: LoopContext) {
        // Called again from inside `onEvent`: the running pass picks up what was marked.
        guard !isServicing else { return }
        isServicing = true
        defer { isServicing = false }
        let now = context.now
        for transmit in endpoint.pollEndpointTransmits() {
            if !socket.canEnqueue, !socket.flush() { break }
            transmit.bytes.withUnsafeBytes {
                socket.enqueue(DatagramMetadata(transmit.path, ecn: transmit.ecn), segmentSize: transmit.segmentSize, bytes: $0)
            }
        }
        var index = 0
        while index < dirty.count {
            let slot = dirty[index]
            if writeBlocked {
                // Deliver events now; packets wait until the socket drains. A timer may have
                // ended the connection: its routes go now, not once the socket drains.
                while let event = slot.connection.pollEvent() { onEvent(slot.connection, event) }
                endpoint.applyRoutingChanges(of: slot.connection)
                index += 1
                continue
            }
            slot.isDirty = false
            let serviced = DriverPass.service(slot.connection, socket: socket, now: now, onEvent: onEvent)
            // Connection IDs announced in what was just written are routed before replies come.
            endpoint.applyRoutingChanges(of: slot.connection)
            if !serviced {
                writeBlocked = true
                context.setWantsWritable(token, true)
                slot.isDirty = true
                index += 1
                continue
            }
            finish(slot, context)
            index += 1
        }
        if writeBlocked {
            dirty.removeAll { !$0.isDirty }
        } else {
            for slot in dirty where slot.isDirty { finish(slot, context) }
            dirty.removeAll(keepingCapacity: true)
        }
        if !writeBlocked { _ = socket.flush() }
    }

    /// Re-arms the connection's timer, or forgets it once terminated.
    private func finish(_ slot: ServerConnectionTimer, _ context: LoopContext) {
        slot.isDirty = false
        endpoint.applyRoutingChanges(of: slot.connection)
        if slot.connection.isTerminated {
            context.deregister(slot.timerToken)
            slots.removeValue(forKey: ObjectIdentifier(slot.connection))
            heapTrim.connectionsChanged(to: slots.count)
        } else {
            context.setTimer(slot.timerToken, at: slot.connection.nextDeadline)
        }
    }

    package func readable(_ context: LoopContext) {
        for _ in 0..<8 {
            // As in the client driver: stamped after the previous batch's writes, and each
            // batch acknowledged as it is processed.
            let now = context.now
            let got = socket.receive { datagram, metadata in
                guard let connection = endpoint.receive(datagram: datagram, path: QUICPath(metadata), ecn: metadata.ecn, now: now)
                else { return }
                let key = ObjectIdentifier(connection)
                if let slot = slots[key] {
                    markDirty(slot)
                } else {
                    let slot = ServerConnectionTimer(connection: connection, server: self)
                    slot.timerToken = context.registerTimer(slot)
                    slots[key] = slot
                    heapTrim.connectionsChanged(to: slots.count)
                    markDirty(slot)
                }
            }
            if !got { break }
            markEvicted()
            serviceDirty(context)
        }
        serviceDirty(context)
    }

    /// Writes the connections the endpoint closed by itself outside a receive pass (at the
    /// listener's buffer limit).
    package func serviceEvictedConnections(_ context: LoopContext) {
        markEvicted()
        serviceDirty(context)
    }

    /// Whether the driver still serves (false once closed).
    package var isServing: Bool { !isClosed }

    /// The bytes this loop's connections hold, as the buffer sweep measured them: gives the heap
    /// back once they fell far below their peak (`HeapTrimPolicy`).
    package func noteHeldBytes(_ bytes: Int) { heapTrim.heldBytesChanged(to: bytes) }

    /// Idle connections the endpoint closed to make room are written like any it was given.
    private func markEvicted() {
        for connection in endpoint.pollEvictedConnections() {
            if let slot = slots[ObjectIdentifier(connection)] { markDirty(slot) }
        }
    }

    /// The endpoint's live counts and counters.
    package var statistics: QUICServerStatistics { endpoint.statistics }

    package func writable(_ context: LoopContext) {
        guard socket.flush() else { return }
        writeBlocked = false
        context.setWantsWritable(token, false)
        for slot in slots.values { markDirty(slot) }
        serviceDirty(context)
    }

    package func timerFired(_ context: LoopContext) {}

    /// Closes every connection with this application error code and sends the
    /// CONNECTION_CLOSE frames now, so peers learn at once (before `close`, which drops them).
    package func closeAllConnections(_ context: LoopContext, applicationErrorCode code: UInt64 = 0) {
        let now = context.now
        for slot in slots.values where !slot.connection.isClosed {
            slot.connection.close(applicationErrorCode: code, now: now)
            markDirty(slot)
        }
        serviceDirty(context)
        // A connection that had sent nothing ends at once; the pass above may not have reached
        // it (blocked socket, or called from inside `onEvent`).
        for slot in slots.values { endpoint.applyRoutingChanges(of: slot.connection) }
    }

    package func close(_ context: LoopContext) {
        guard !isClosed else { return }
        isClosed = true
        for slot in slots.values { context.deregister(slot.timerToken) }
        slots.removeAll()
        dirty.removeAll()
        context.deregister(token)
        socket.close()
    }
}
