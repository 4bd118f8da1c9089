import BraidCore
import Dispatch
import Foundation

/// A connection in Network.framework's classic API: completion handlers on a `DispatchQueue`
/// instead of `async` calls. It runs the same stacks as `NetworkConnection` (TLS over TCP, TCP,
/// UDP, and QUIC, where it is one bidirectional stream of a QUIC connection, as Apple's).
///
/// ```swift
/// let connection = NWConnection(host: "example.com", port: 443, using: .tls)
/// connection.stateUpdateHandler = { state in
///     switch state {
///     case .ready: print("ready")
///     case .waiting(let error): print("waiting: \(error)")
///     case .failed(let error): print("failed: \(error)")
///     default: break
///     }
/// }
/// connection.start(queue: .main)
/// connection.send(content: Data("hello".utf8), completion: .contentProcessed { error in
///     if let error { print("send failed: \(error)") }
/// })
/// connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, error in
///     print(content?.count ?? 0, isComplete, error as Any)
/// }
/// ```
///
/// Every handler and completion runs on the queue given to `start(queue:)`, one at a time.
/// Sends and receives made before `start(queue:)` wait for it. Each completion is called
/// exactly once: a call still pending when the connection is cancelled completes with
/// `.posix(.ECANCELED)`.
public final class NWConnection: Sendable, CustomDebugStringConvertible {
    /// Where the connection goes (a listener's connection: where it came from).
    public let endpoint: NWEndpoint
    /// The parameters the connection was made with.
    public let parameters: NWParameters

    private struct Handlers {
        var state: (@Sendable (State) -> Void)?
        var viability: (@Sendable (Bool) -> Void)?
        var betterPath: (@Sendable (Bool) -> Void)?
        var path: (@Sendable (NWPath) -> Void)?
    }
    private let handlers = Locked(Handlers())
    /// The queue of `start(queue:)`, and the last state handed to the state handler there.
    private let delivery = Locked<(queue: DispatchQueue?, lastState: State?)>((nil, nil))
    let transfer: any ClassicTransfer
    private let sends = ClassicOperationQueue()
    private let receives = ClassicOperationQueue()
    /// A listener's connection runs already; `start(queue:)` only sets its queue.
    private let isInbound: Bool

    /// A connection to `host` and `port` with `parameters`. Nothing happens before `start(queue:)`.
    public convenience init(host: NWEndpoint.Host, port: NWEndpoint.Port, using parameters: NWParameters) {
        self.init(to: .hostPort(host: host, port: port), using: parameters)
    }

    /// A connection to `endpoint` with `parameters`. Nothing happens before `start(queue:)`.
    public init(to endpoint: NWEndpoint, using parameters: NWParameters) {
        self.endpoint = endpoint
        self.parameters = parameters
        isInbound = false
        transfer = Self.transfer(to: endpoint, parameters: parameters)
        watchStates()
    }

    /// A listener's connection, already running.
    init(inbound transfer: any ClassicTransfer, endpoint: NWEndpoint, parameters: NWParameters) {
        self.endpoint = endpoint
        self.parameters = parameters
        self.transfer = transfer
        isInbound = true
        watchStates()
    }

    private static func transfer(to endpoint: NWEndpoint, parameters: NWParameters) -> any ClassicTransfer {
        let binding: any StackBinding
        do {
            binding = try parameters.stackBinding()
        } catch {
            return FailedTransfer(NetworkError(error))
        }
        guard let classic = binding as? any ClassicBinding else {
            return FailedTransfer(.unsupported("\(type(of: binding)) on NWConnection (TLS, TCP, UDP and QUIC run there; use NetworkConnection for the others)"))
        }
        return classic.clientTransfer(to: endpoint, parameters: parameters)
    }

    public var debugDescription: String { "NWConnection to \(endpoint) (\(parameters.debugDescription)): \(state)" }

    // MARK: State

    /// The connection's states.
    public enum State: Sendable, Hashable, CustomDebugStringConvertible {
        /// Made, not started.
        case setup
        /// No usable path now; the connection retries by itself when the path changes
        /// (`restart()` retries at once).
        case waiting(NWError)
        /// Resolving, connecting, handshaking.
        case preparing
        /// Sends and receives flow.
        case ready
        /// Ended with an error.
        case failed(NWError)
        /// Ended by `cancel()`.
        case cancelled

        init(_ state: NetworkConnectionState) {
            switch state {
            case .setup: self = .setup
            case .preparing: self = .preparing
            case .waiting(let error): self = .waiting(NWError(error))
            case .ready: self = .ready
            case .failed(let error): self = .failed(NWError(error))
            case .cancelled: self = .cancelled
            }
        }

        public var debugDescription: String {
            switch self {
            case .setup: "setup"
            case .waiting(let error): "waiting(\(error.debugDescription))"
            case .preparing: "preparing"
            case .ready: "ready"
            case .failed(let error): "failed(\(error.debugDescription))"
            case .cancelled: "cancelled"
            }
        }
    }

    /// The state now (`setup` until `start(queue:)`).
    public var state: State {
        delivery.withLock { $0.queue } == nil && !isInbound ? .setup : State(transfer.states.current)
    }

    /// Called on the connection's queue with every state change after `start(queue:)`.
    public var stateUpdateHandler: (@Sendable (_ state: State) -> Void)? {
        get { handlers.withLock { $0.state } }
        set { handlers.withLock { $0.state = newValue } }
    }

    /// Called with `false` when the connection's path goes away and `true` when it returns
    /// (see `NetworkConnection.onViabilityUpdate`).
    public var viabilityUpdateHandler: (@Sendable (_ isViable: Bool) -> Void)? {
        get { handlers.withLock { $0.viability } }
        set {
            handlers.withLock { $0.viability = newValue }
            guard newValue != nil else { return }
            transfer.onViabilityUpdate { [weak self] viable in self?.deliver { $0.viability?(viable) } }
        }
    }

    /// Called with `true` when a better path than the connection's appears, and `false` when
    /// it is gone (see `NetworkConnection.onBetterPathUpdate`).
    public var betterPathUpdateHandler: (@Sendable (_ betterPathAvailable: Bool) -> Void)? {
        get { handlers.withLock { $0.betterPath } }
        set {
            handlers.withLock { $0.betterPath = newValue }
            guard newValue != nil else { return }
            transfer.onBetterPathUpdate { [weak self] better in self?.deliver { $0.betterPath?(better) } }
        }
    }

    /// Called with the connection's path once ready, and on every change (see
    /// `NetworkConnection.onPathUpdate`).
    public var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)? {
        get { handlers.withLock { $0.path } }
        set {
            handlers.withLock { $0.path = newValue }
            guard newValue != nil else { return }
            transfer.onPathUpdate { [weak self] path in self?.deliver { $0.path?(path) } }
        }
    }

    /// The connection's path while it is ready (nil before), with its `localEndpoint` and
    /// `remoteEndpoint`: the path last reported once `pathUpdateHandler` (or a viability or
    /// better-path handler) watches it, with its interface; otherwise a satisfied path with the
    /// endpoints and no interface list (see `NetworkConnection.currentPath`).
    ///
    /// ```swift
    /// if let remote = connection.currentPath?.remoteEndpoint {
    ///     print("talking to \(remote)")
    /// }
    /// ```
    public var currentPath: NWPath? { transfer.currentPath }

    /// The queue handlers and completions run on, once started.
    public var queue: DispatchQueue? { delivery.withLock { $0.queue } }

    // MARK: Lifecycle

    /// Starts the connection; every handler and completion runs on `queue` from now on.
    /// Calls after the first do nothing.
    public func start(queue: DispatchQueue) {
        let first = delivery.withLock { delivery -> Bool in
            guard delivery.queue == nil else { return false }
            delivery.queue = queue
            return true
        }
        guard first else { return }
        if isInbound {
            deliverState(transfer.states.current)
        } else {
            transfer.start()
        }
        sends.resume()
        receives.resume()
    }

    /// Closes the connection (TCP and TLS: the bytes of sends already completed, then
    /// close_notify and FIN) and completes every pending call with `.posix(.ECANCELED)`.
    public func cancel() {
        transfer.cancel()
        // Pending calls run now and meet the cancelled connection; without a queue they
        // complete on a queue of their own.
        delivery.withLock { if $0.queue == nil { $0.queue = DispatchQueue(label: "braid.nwconnection") } }
        sends.resume()
        receives.resume()
    }

    /// Closes at once, without the graceful end: TCP and TLS abort with a reset (SO_LINGER
    /// 0; no close_notify or FIN, and bytes not yet sent are dropped, so the peer's next read
    /// or write fails with ECONNRESET); UDP closes as `cancel()` does. Every pending call
    /// completes with `.posix(.ECANCELED)`.
    public func forceCancel() {
        transfer.forceCancel()
        delivery.withLock { if $0.queue == nil { $0.queue = DispatchQueue(label: "braid.nwconnection") } }
        sends.resume()
        receives.resume()
    }

    /// Rejects the address being tried and moves on to the next one the endpoint resolved to
    /// (Happy Eyeballs' next attempt, at once); with none left, the connection waits. A ready
    /// UDP connection (no handshake told whether the peer answers) moves to the next address;
    /// a ready TCP or TLS connection stays on its own (see `NetworkConnection.tryNextEndpoint()`).
    public func cancelCurrentEndpoint() {
        transfer.cancelCurrentEndpoint()
    }

    /// Retries at once while the connection is `waiting` (it also retries by itself when the
    /// path changes).
    public func restart() {
        transfer.restart()
    }

    private func watchStates() {
        transfer.states.setHandler { [weak self] state in self?.deliverState(state) }
    }

    /// Hands `state` to the state handler on the queue, once started, skipping repeats.
    private func deliverState(_ state: NetworkConnectionState) {
        let mapped = State(state)
        let queue = delivery.withLock { delivery -> DispatchQueue? in
            guard let queue = delivery.queue, delivery.lastState != mapped else { return nil }
            delivery.lastState = mapped
            return queue
        }
        guard let queue else { return }
        ClassicFailureLog.record(state, of: "NWConnection to \(endpoint)")
        queue.async { self.handlers.withLock { $0.state }?(mapped) }
    }

    /// Runs `body` with the handlers on the queue, once started.
    private func deliver(_ body: @escaping @Sendable (Handlers) -> Void) {
        guard let queue = delivery.withLock({ $0.queue }) else { return }
        queue.async { body(self.handlers.withLock { $0 }) }
    }

    /// Runs `completion` on the connection's queue (a queue of its own if the connection was
    /// cancelled before it started).
    func complete(_ completion: @escaping @Sendable () -> Void) {
        let queue = delivery.withLock { delivery -> DispatchQueue in
            if let queue = delivery.queue { return queue }
            let own = DispatchQueue(label: "braid.nwconnection")
            delivery.queue = own
            return own
        }
        queue.async(execute: completion)
    }

    // MARK: Sending

    /// What `send` calls when the content has been handled.
    public enum SendCompletion: Sendable {
        /// Called once the connection has taken the content (or failed to).
        case contentProcessed(@Sendable (_ error: NWError?) -> Void)
        /// No completion: the content is safe to send again (replayable), so it may travel as
        /// early data. On a TLS connection with `NWParameters.allowFastOpen` that resumes a
        /// session, idempotent content sent before the handshake completes (before or right
        /// after `start(queue:)`) goes as TLS 1.3 early data, up to the server's limit; if the
        /// server refuses it, Braid sends it again after the handshake, in order. Elsewhere it
        /// is sent as any other content.
        case idempotent
    }

    /// Sends `content` (nil: none, to mark an end alone). With a context whose `isFinal` is
    /// true (`.finalMessage`, `.defaultStream`) and `isComplete`, a byte stream ends after it
    /// (TCP FIN; TLS close_notify first). On UDP each send is one datagram.
    public func send(
        content: Data?, contentContext: ContentContext = .defaultMessage, isComplete: Bool = true, completion: SendCompletion
    ) {
        let idempotent: Bool
        if case .idempotent = completion { idempotent = true } else { idempotent = false }
        let options = ClassicSendOptions(
            isFinal: isComplete && contentContext.isFinal, idempotent: idempotent, metadata: contentContext.protocolMetadata,
            isComplete: isComplete)
        let transfer = transfer
        let done: @Sendable (NWError?) -> Void = { [weak self] error in
            guard case .contentProcessed(let handler) = completion else { return }
            guard let self else {
                handler(error)
                return
            }
            complete { handler(error) }
        }
        // Idempotent content is queued even before `start(queue:)`, so that it is there for
        // early data when the connection starts.
        sends.submit(beforeResume: idempotent, trying: {
            switch transfer.send(content, options: options) {
            case .done:
                done(nil)
                return nil
            case .failed(let error):
                done(error)
                return nil
            case .wait(let rest):
                return { await Self.finish(rest, done) }
            }
        }, otherwise: {
            switch transfer.send(content, options: options) {
            case .done: done(nil)
            case .failed(let error): done(error)
            case .wait(let rest): await Self.finish(rest, done)
            }
        })
    }

    private static func finish(_ rest: @Sendable () async throws -> Void, _ done: @Sendable (NWError?) -> Void) async {
        do {
            try await rest()
            done(nil)
        } catch {
            done(NWError(NetworkError(error)))
        }
    }

    /// Runs `block` and sends what it sends together (UDP: one pass of the connection's loop,
    /// one `sendmmsg` or GSO write). Synchronous, as Network.framework's.
    public func batch(_ block: () -> Void) {
        transfer.batch(block)
    }

    // MARK: Receiving

    /// Receives at least `minimumIncompleteLength` and at most `maximumLength` bytes of a byte
    /// stream (fewer at its end, with `isComplete` true), or the next datagram of a UDP
    /// connection (whole, with `isComplete` true).
    public func receive(
        minimumIncompleteLength: Int, maximumLength: Int,
        completion: @escaping @Sendable (_ content: Data?, _ contentContext: ContentContext?, _ isComplete: Bool, _ error: NWError?) -> Void
    ) {
        let transfer = transfer
        receives.submit { [weak self] in
            let result = await Self.result {
                try await transfer.receiveWithMetadata(minimum: max(minimumIncompleteLength, 0), maximum: max(maximumLength, 1))
            }
            self?.complete { completion(result.content, result.context, result.isComplete, result.error) } ?? completion(result.content, result.context, result.isComplete, result.error)
        }
    }

    /// Receives one whole message: the next datagram of a UDP connection, or everything a byte
    /// stream carries up to its end (at most 16 MiB; more fails with `.posix(.EMSGSIZE)`).
    public func receiveMessage(
        completion: @escaping @Sendable (_ content: Data?, _ contentContext: ContentContext?, _ isComplete: Bool, _ error: NWError?) -> Void
    ) {
        let transfer = transfer
        receives.submit { [weak self] in
            let result = await Self.result { try await transfer.receiveMessageWithMetadata() }
            self?.complete { completion(result.content, result.context, result.isComplete, result.error) } ?? completion(result.content, result.context, result.isComplete, result.error)
        }
    }

    private struct ReceiveResult: Sendable {
        var content: Data?
        var context: ContentContext?
        var isComplete: Bool
        var error: NWError?
    }

    private static func result(_ receive: () async throws -> ClassicReceipt) async -> ReceiveResult {
        do {
            let receipt = try await receive()
            let isComplete = receipt.isComplete
            let context: ContentContext
            if receipt.metadata.isEmpty {
                context = isComplete ? .finalMessage : .defaultMessage
            } else {
                context = ContentContext(identifier: isComplete ? "final" : "default", isFinal: isComplete, metadata: receipt.metadata)
            }
            return ReceiveResult(content: receipt.content, context: context, isComplete: isComplete)
        } catch {
            return ReceiveResult(content: nil, context: nil, isComplete: false, error: NWError(NetworkError(error)))
        }
    }
}

extension NWConnection {
    /// What the protocol `definition` names agreed on this connection, once ready: TLS's
    /// (`NWProtocolTLS.Metadata`: the negotiated application protocol) on a TLS connection;
    /// nil for a protocol the connection does not run, or before it is ready.
    ///
    /// ```swift
    /// let tls = connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata
    /// ```
    public func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? {
        guard State(transfer.states.current) == .ready else { return nil }
        return transfer.metadata(definition: definition)
    }
}
