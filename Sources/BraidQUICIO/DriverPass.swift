import BraidIO
import BraidQUIC

/// Called on the loop for every engine event, in order.
package typealias QUICEventHandler = (QUICConnection, QUICEvent) -> Void

/// One pass of a driver over one engine connection after any input to it (events, then
/// writes), shared by the client and server drivers.
enum DriverPass {
    /// Delivers pending events, then moves every packet the engine may send now into `socket`
    /// and flushes. Returns false when the socket's buffer is full (resume when writable).
    static func service(_ connection: QUICConnection, socket: any DatagramSocket, now: QUICInstant, onEvent: QUICEventHandler) -> Bool {
        while let event = connection.pollEvent() { onEvent(connection, event) }
        while true {
            if !socket.canEnqueue, !socket.flush() { return false }
            var wrote = false
            // Packets are written straight into the socket's send queue.
            connection.writeTransmits(now: now, maxBatches: 1, into: { socket.freeSlot }) { path, ecn, segmentSize, length in
                socket.commitSlot(DatagramMetadata(path, ecn: ecn), segmentSize: segmentSize, length: length)
                wrote = true
            }
            if !wrote { break }
        }
        // Writing can end the connection (e.g. an error turned into a close): report it.
        while let event = connection.pollEvent() { onEvent(connection, event) }
        return socket.flush()
    }
}
