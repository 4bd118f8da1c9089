import Foundation

/// What `NWConnection` needs of a connection, whatever its stack: made by the stack's
/// `ClassicBinding` over a new-API `NetworkConnection`, so both dialects run one
/// implementation of every stack.
protocol ClassicTransfer: AnyObject, Sendable {
    /// The connection's states (the new API's; `NWConnection` maps them).
    var states: StateBroadcast { get }
    /// Starts connecting (nothing for a listener's connection, which runs already).
    func start()
    /// Closes gracefully and ends every pending call with cancellation.
    func cancel()
    /// Retries at once if the connection is waiting.
    func restart()
    /// Hands `content` to the connection: at once when it has room, or through the returned
    /// wait. `isFinal`: nothing follows (a stream's end).
    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt
    /// At least `minimum` and at most `maximum` bytes (a datagram stack: the next datagram);
    /// `isComplete` once nothing follows.
    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool)
    /// One whole message: the next datagram, or a byte stream up to its end.
    func receiveMessage() async throws -> (content: Data?, isComplete: Bool)
    /// `send` with the content context's protocol metadata (a WebSocket message's opcode).
    func send(_ content: Data?, metadata: [NWProtocolMetadata], isFinal: Bool) -> ClassicSendAttempt
    /// `receive` with the protocol metadata of what arrived (a WebSocket message's opcode).
    func receiveWithMetadata(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool, metadata: [NWProtocolMetadata])
    /// `receiveMessage` with the protocol metadata of what arrived.
    func receiveMessageWithMetadata() async throws -> (content: Data?, isComplete: Bool, metadata: [NWProtocolMetadata])
    /// Runs `body`; sends inside leave together once it returns.
    func batch(_ body: () -> Void)
    /// What the protocol `definition` names agreed (nil: the connection does not run it).
    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata?
    /// Path, viability and better-path changes, as the new API reports them.
    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void)
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void)
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void)
}

/// Stacks whose contents carry no protocol metadata of their own (TCP, TLS, UDP) ignore it.
extension ClassicTransfer {
    func send(_ content: Data?, metadata: [NWProtocolMetadata], isFinal: Bool) -> ClassicSendAttempt {
        send(content, isFinal: isFinal)
    }

    func receiveWithMetadata(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool, metadata: [NWProtocolMetadata]) {
        let (content, isComplete) = try await receive(minimum: minimum, maximum: maximum)
        return (content, isComplete, [])
    }

    func receiveMessageWithMetadata() async throws -> (content: Data?, isComplete: Bool, metadata: [NWProtocolMetadata]) {
        let (content, isComplete) = try await receiveMessage()
        return (content, isComplete, [])
    }
}

/// What a send did at once.
enum ClassicSendAttempt: Sendable {
    /// The connection took the content.
    case done
    /// The send failed.
    case failed(NWError)
    /// The connection takes the content once this returns.
    case wait(@Sendable () async throws -> Void)
}

/// A stack whose connections the classic API runs: TCP, TLS and UDP.
protocol ClassicBinding: StackBinding {
    /// The classic API's view of `connection`.
    static func transfer(over connection: NetworkConnection<Self>) -> any ClassicTransfer
}

extension ClassicBinding {
    /// A new client connection over this stack, as the classic API sees it.
    func clientTransfer(to endpoint: NWEndpoint, parameters: NWParameters) -> any ClassicTransfer {
        Self.transfer(over: NetworkConnection(to: endpoint, using: parameters.networkParameters(stack: self)))
    }
}

/// The connection of a stack the classic API cannot run, or of parameters that describe no
/// stack: it fails with `error` once started.
final class FailedTransfer: ClassicTransfer {
    let states = StateBroadcast()
    private let error: NetworkError

    init(_ error: NetworkError) { self.error = error }

    func start() {
        states.update(.preparing)
        states.update(.failed(error))
    }
    func cancel() { states.update(.cancelled) }
    func restart() {}
    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt { .failed(NWError(error)) }
    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) { throw error }
    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) { throw error }
    func batch(_ body: () -> Void) { body() }
    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? { nil }
    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void) {}
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void) {}
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void) {}
}
