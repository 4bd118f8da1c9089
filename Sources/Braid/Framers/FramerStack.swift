import BraidIO
import BraidWebSocketIO

/// A custom framer over TLS, TCP or UDP, whichever dialect named it: `Framer<T>` in the new
/// API, `NWProtocolFramer.Options` in the classic one. Over TLS or TCP its connections are the
/// byte-stream binding's with a `FramerLayer` over each socket (over TLS's layer, or a
/// pass-through one), and the message receiver framed stacks use above it; over UDP they are
/// UDP's with a `FramerDatagramLayer` in each channel.
struct FramerStack: NetworkProtocol {
    let definition: NWProtocolFramer.Definition
    let lower: ByteStreamLower
    /// UDP below: the framer runs over datagrams.
    let udp: UDP?
    /// The largest message the framer may deliver (16 MiB by default).
    var maximumMessageSize = TLVFraming.defaultMaximumMessageSize

    init(definition: NWProtocolFramer.Definition, over lower: some NetworkProtocol) {
        self.definition = definition
        udp = lower as? UDP
        self.lower = ByteStreamLower(lower) {
            if $0 == "QUIC" {
                "the framer \(definition.name) over a QUIC stream (a custom framer runs over TLS, TCP or UDP; over QUIC streams it is not supported yet)"
            } else {
                "the framer \(definition.name) over \($0) (a custom framer runs over TLS, TCP or UDP)"
            }
        }
    }
}

/// Over UDP the framer's binding is UDP's with the framer's layer in each connection's channel;
/// otherwise the byte-stream one.
extension FramerStack: StackBinding {
    private var binding: any StackBinding { udp.map { FramerOverUDP(framer: self, udp: $0) } ?? FramerOverByteStream(framer: self) }

    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        binding.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        try binding.startClient(start)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try await binding.startListener(listener)
    }
}

/// A framer over TLS or TCP (or what else was asked for, which cannot run it).
struct FramerOverByteStream: ByteStreamLayeredStack {
    let framer: FramerStack
    var lower: ByteStreamLower { framer.lower }
    var maximumMessageSize: Int { framer.maximumMessageSize }

    func layering(tls: TLS?) -> any ByteStreamLayering { FramerLayering(framer: framer, tls: tls) }
}

/// A framer over UDP: UDP's binding, each connection's channel running a `FramerDatagramLayer`
/// (ready once the framer is).
struct FramerOverUDP: StackBinding {
    let framer: FramerStack
    let udp: UDP

    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        udp.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: maximumMessageSize)
    }

    private var layer: DatagramLayerMaker {
        let definition = framer.definition, maximumMessageSize = framer.maximumMessageSize, timeout = TLS().handshakeTimeout
        return { core in
            FramerDatagramLayer(
                definition: definition, maximumMessageSize: maximumMessageSize, messages: core.shared.datagram?.framerMessages ?? FramerMessages(),
                loop: core.loop, handshakeTimeout: timeout)
        }
    }

    func startClient(_ start: ClientStart) throws {
        try udp.startClient(start, layer: layer)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try await udp.startListener(listener, layer: layer)
    }
}

/// A framer layer over each connection's socket, over TLS's layer or a pass-through one.
struct FramerLayering: UpperLayering {
    let framer: FramerStack
    let tls: TLS?

    func clientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer {
        let inner = try innerClientLayer(endpoint: endpoint, remote: remote)
        return FramerLayer(definition: framer.definition, maximumMessageSize: framer.maximumMessageSize, over: inner, endHoldLimit: handshakeTimeout)
    }

    func serverLayers() throws -> @Sendable () throws -> any ByteStreamLayer {
        let innerLayers = try innerServerLayers()
        let definition = framer.definition, maximumMessageSize = framer.maximumMessageSize, endHoldLimit = handshakeTimeout
        return {
            FramerLayer(definition: definition, maximumMessageSize: maximumMessageSize, over: try innerLayers(), endHoldLimit: endHoldLimit)
        }
    }
}
