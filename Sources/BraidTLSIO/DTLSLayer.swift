import BraidIO
import BraidTLS

/// The DTLS engine as a `DatagramLayer`: a `DatagramChannel` runs it between its socket and
/// its messages, each message one record in one datagram.
package final class DTLSLayer: DatagramLayer {
    package let engine: DTLSConnection

    package init(_ engine: DTLSConnection) { self.engine = engine }

    package func start() throws {
        // A client's first pass queues its ClientHello; a server's waits for one.
        _ = try process { _ in }
    }

    package func receive(_ datagram: UnsafeRawBufferPointer) {
        engine.receiveDatagram(datagram)
    }

    package func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> Bool {
        _ = try engine.process(deliver: deliver)
        return engine.isHandshakeComplete
    }

    package func seal(_ message: UnsafeRawBufferPointer) throws {
        // The channel drains the engine's datagrams after each seal, so its queue has room.
        _ = try engine.send(message)
    }

    package var maximumMessageSize: Int { engine.maximumMessageSize }

    package func popOutput() -> [UInt8]? { engine.popDatagram() }

    package var timeout: Duration? { engine.retransmissionTimeout }

    package func close() { engine.close() }

    package var negotiatedALPN: String? { engine.negotiatedALPN }
}
