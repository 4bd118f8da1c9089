import BraidIO
import Foundation

/// A type naming a custom framer for the new API's `Framer<T>`: its classic
/// `NWProtocolFramer.Definition` (usually the `NWProtocolFramerImplementation` class itself,
/// whose `static let definition` already is one).
///
/// ```swift
/// extension LinesFramer: FramerProtocol {}
/// ```
public protocol FramerProtocol {
    static var definition: NWProtocolFramer.Definition { get }
}

/// A custom framer in the new API's stack builder, over TLS or TCP: the classic
/// `NWProtocolFramer` definition `T` names, run by the same machinery.
///
/// ```swift
/// let lines = NetworkConnection(to: .hostPort(host: "localhost", port: 7000)) { Framer<LinesFramer> { TCP() } }
/// try await lines.send(Data("hello".utf8))
/// let (content, metadata) = try await lines.receive()
/// ```
///
/// Each `send` is one message, handed whole to the framer's `handleOutput` with the
/// `NWProtocolFramer.Message` passed as `metadata`; each `receive()` returns one message the
/// framer delivered, with the message it delivered it with (`metadata.framer`). Over UDP each
/// datagram is the framer's whole input and each message sent one datagram; over a QUIC
/// stream a connection or listener fails with `NetworkError.unsupported`. Limits: see
/// `NWProtocolFramer.Instance`.
public struct Framer<T: FramerProtocol>: NetworkProtocol {
    /// What a received message carries besides its content.
    public struct Metadata: Sendable {
        /// The framer's message, as its `handleInput` delivered it, with the framer's values.
        public let framer: NWProtocolFramer.Message
        /// Whether the message is whole (always: Braid delivers whole messages).
        public let isComplete: Bool
        /// Whether nothing follows on the connection (false: the end is seen on the next
        /// receive).
        public let lastMessage: Bool
        /// Other protocols' metadata of the message (none).
        public let other: [NWProtocolMetadata]

        public init(framer: NWProtocolFramer.Message, isComplete: Bool = true, lastMessage: Bool = false, other: [NWProtocolMetadata] = []) {
            self.framer = framer
            self.isComplete = isComplete
            self.lastMessage = lastMessage
            self.other = other
        }
    }

    var stack: FramerStack

    /// The framer `T` names over the stack the builder returns: `Framer<LinesFramer> { TLS() }`.
    public init<Below: NetworkProtocol>(@ProtocolStackBuilder _ builder: () -> Below) {
        stack = FramerStack(definition: T.definition, over: builder())
    }

    /// The framer `framer` names over the stack the builder returns:
    /// `Framer(using: LinesFramer.self) { TCP() }`.
    public init<Below: NetworkProtocol>(using framer: T.Type, @ProtocolStackBuilder _ builder: () -> Below) {
        stack = FramerStack(definition: T.definition, over: builder())
    }

    /// The largest message the framer may deliver, in bytes (default 16 MiB): a larger one
    /// fails the connection with `NetworkError.messageTooLarge`.
    public var maximumMessageSize: Int { stack.maximumMessageSize }

    /// Accepts messages of at most `bytes` bytes (0 to UInt32.max) from the framer.
    ///
    /// ```swift
    /// let stack = Framer<LinesFramer> { TCP() }.maximumMessageSize(64 * 1024)
    /// ```
    public func maximumMessageSize(_ bytes: Int) -> Framer {
        var copy = self
        copy.stack.maximumMessageSize = min(max(0, bytes), TLVFraming.largestEncodableSize)
        return copy
    }
}

extension NWProtocolFramer {
    /// The most input bytes a framer may leave unconsumed (1 MiB): past it, or asked for a
    /// `parseInput` minimum above it, the connection fails with `NetworkError.messageTooLarge`.
    public static let maximumBufferedInput = 1 << 20
}

extension Framer: StackBinding {
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        stack.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        try stack.startClient(start)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try await stack.startListener(listener)
    }
}
