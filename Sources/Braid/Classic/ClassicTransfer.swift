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
    /// Closes at once (TCP and TLS: a reset) and ends every pending call with cancellation.
    func forceCancel()
    /// Retries at once if the connection is waiting.
    func restart()
    /// Gives up on the address being tried for the next one (`tryNextEndpoint()`).
    func cancelCurrentEndpoint()
    /// Hands `content` to the connection: at once when it has room, or through the returned
    /// wait. `isFinal`: nothing follows (a stream's end).
    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt
    /// At least `minimum` and at most `maximum` bytes (a datagram stack: the next datagram);
    /// `isComplete` once nothing follows.
    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool)
    /// One whole message: the next datagram, or a byte stream up to its end.
    func receiveMessage() async throws -> (content: Data?, isComplete: Bool)
    /// `send(_:isFinal:)` with what the send's context and completion asked for besides its
    /// bytes (early data, IP marks). By default the stack ignores them, as Network.framework's
    /// byte streams ignore per-packet marks.
    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt
    /// `receive(minimum:maximum:)` with the received content's protocol metadata (a
    /// datagram's IP and UDP metadata); by default none.
    func receiveWithMetadata(minimum: Int, maximum: Int) async throws -> ClassicReceipt
    /// `receiveMessage()` with the message's protocol metadata; by default none.
    func receiveMessageWithMetadata() async throws -> ClassicReceipt
    /// Runs `body`; sends inside leave together once it returns.
    func batch(_ body: () -> Void)
    /// What the protocol `definition` names agreed (nil: the connection does not run it).
    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata?
    /// The connection's path now: nil before it is ready (the new API's `currentPath`).
    var currentPath: NWPath? { get }
    /// Path, viability and better-path changes, as the new API reports them.
    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void)
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void)
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void)
}

extension ClassicTransfer {
    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        send(content, isFinal: options.isFinal)
    }

    func receiveWithMetadata(minimum: Int, maximum: Int) async throws -> ClassicReceipt {
        let (content, isComplete) = try await receive(minimum: minimum, maximum: maximum)
        return ClassicReceipt(content: content, isComplete: isComplete)
    }

    func receiveMessageWithMetadata() async throws -> ClassicReceipt {
        let (content, isComplete) = try await receiveMessage()
        return ClassicReceipt(content: content, isComplete: isComplete)
    }

    /// Everything a byte stream carries up to its end, read with `receive(minimum:maximum:)`
    /// (`receiveMessage` of the byte-stream transfers): at most `limit` bytes (16 MiB), more
    /// throws `messageTooLarge`.
    func gatherUntilEnd(limit: Int = 16 << 20) async throws -> (content: Data?, isComplete: Bool) {
        var message = Data()
        while true {
            let (content, isComplete) = try await receive(minimum: 1, maximum: 64 << 10)
            if let content { message.append(content) }
            if message.count > limit {
                throw NetworkError.messageTooLarge(size: message.count, maximum: limit)
            }
            if isComplete { return (message.isEmpty ? nil : message, true) }
        }
    }
}

/// What a classic send asks for besides its bytes.
struct ClassicSendOptions: Sendable {
    /// Nothing follows: a byte stream ends after this content.
    var isFinal: Bool
    /// Sent with `.idempotent`: may travel as early data (TLS 1.3, QUIC 0-RTT).
    var idempotent = false
    /// Its context's protocol metadata (`NWProtocolIP.Metadata`: a UDP datagram's marks).
    var metadata: [NWProtocolMetadata] = []
    /// The send's `isComplete` (a custom framer's message is told whether it is whole).
    var isComplete = true
}

/// One receive's result with the content's protocol metadata.
struct ClassicReceipt: Sendable {
    var content: Data?
    var isComplete: Bool
    var metadata: [NWProtocolMetadata] = []
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

/// A stack whose connections the classic API runs: TCP, TLS, UDP and QUIC.
protocol ClassicBinding: StackBinding {
    /// The classic API's view of `connection`.
    static func transfer(over connection: NetworkConnection<Self>) -> any ClassicTransfer
    /// Hands what `NWListener`'s `newConnectionHandler` gets of an inbound `connection` to
    /// `hand`, and returns once all of it has ended: by default the connection itself, as
    /// `transfer(over:)` sees it.
    static func serve(_ connection: NetworkConnection<Self>, handing hand: @escaping @Sendable (any ClassicTransfer) -> Void) async throws
}

extension ClassicBinding {
    static func serve(_ connection: NetworkConnection<Self>, handing hand: @escaping @Sendable (any ClassicTransfer) -> Void) async throws {
        hand(transfer(over: connection))
        // The connection stays open until it ends (cancelled by the application, or by its
        // peer); cancelling the listener cancels this wait and closes it.
        for await state in connection.states where state.isFinal { break }
    }

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
    func forceCancel() { cancel() }
    func restart() {}
    func cancelCurrentEndpoint() {}
    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt { .failed(NWError(error)) }
    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) { throw error }
    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) { throw error }
    func batch(_ body: () -> Void) { body() }
    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? { nil }
    var currentPath: NWPath? { nil }
    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void) {}
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void) {}
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void) {}
}
