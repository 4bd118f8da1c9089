import BraidIO
import Logging

/// One loop's accepted TCP connections: makes a public connection, with its own byte-stream
/// channel, for each accepted socket (with the stack's layer over it, TLS's server engine) and
/// hands it to the listener. Lives on the loop.
final class InboundByteStreams<ApplicationProtocol: NetworkProtocol> {
    private let stack: ApplicationProtocol
    private let tcp: TCP
    /// Makes each accepted socket's layer (nil: plain TCP).
    private let layers: (@Sendable () throws -> any ByteStreamLayer)?
    private let handshakeTimeout: Duration
    /// A framer's largest message, when the connections carry `TLV` or `Coder` messages.
    private let maximumMessageSize: Int?
    private let admission: ConnectionAdmission
    private let intake: InboundIntake<ApplicationProtocol>
    private static var logger: Logger { Logger(label: "braid.listener") }

    init(
        stack: ApplicationProtocol, tcp: TCP, layers: (@Sendable () throws -> any ByteStreamLayer)?, handshakeTimeout: Duration,
        maximumMessageSize: Int?, admission: ConnectionAdmission, intake: InboundIntake<ApplicationProtocol>
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.stack = stack
        self.tcp = tcp
        self.layers = layers
        self.handshakeTimeout = handshakeTimeout
        self.admission = admission
        self.intake = intake
    }

    /// An accepted socket becomes a connection, unless the listener is full or `run` was
    /// cancelled (then it is reset at once, so the client learns it was refused instead of
    /// waiting).
    func accept(_ socket: any ByteStreamSocket, context: LoopContext) {
        guard admission.admit() else {
            socket.abort()
            return
        }
        // A Unix-domain client has no name of its own: its connection is known by the socket file.
        let peer = socket.unixPath.map { NWEndpoint.unix(path: $0) } ?? NWEndpoint(socket.remoteAddress)
        let layer: (any ByteStreamLayer)?
        do {
            layer = try layers?()
        } catch {
            Self.logger.warning("cannot start the connection's layer (TLS session) for \(peer): \(error)")
            socket.abort()
            admission.release()
            return
        }
        let admission = admission
        let admitted = intake.admit {
            let core = ConnectionCore(
                byteStreamOn: context.loop, endpointDescription: peer.description, tcp: tcp, handshakeTimeout: handshakeTimeout,
                maximumMessageSize: maximumMessageSize)
            core.whenEnded = { admission.release() }
            core.shared.states.update(.preparing)
            core.shared.byteStream?.adopt(layer)
            core.byteStream.attach(socket: socket, layer: layer, context: context)
            return NetworkConnection(inbound: peer, stack: stack, core: LoopBound(core, on: context.loop), shared: core.shared)
        }
        if admitted == nil {
            // Accepted from the backlog before the listening socket closed.
            socket.abort()
            admission.release()
        }
    }
}
