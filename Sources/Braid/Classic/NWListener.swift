import BraidCore
import Dispatch
import Foundation

/// A listener in Network.framework's classic API: each inbound connection goes to
/// `newConnectionHandler` as an `NWConnection`, on the listener's queue. It runs the same
/// listeners as `NetworkListener` (TLS over TCP, TCP, UDP, DTLS over UDP, and QUIC, whose
/// handler gets each stream a client opens, as Apple's).
///
/// ```swift
/// let listener = try NWListener(using: .tcp, on: 8080)
/// listener.newConnectionHandler = { connection in
///     connection.start(queue: .main)
///     connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, _, _ in
///         connection.send(content: content, completion: .contentProcessed { _ in connection.cancel() })
///     }
/// }
/// listener.start(queue: .main)
/// ```
///
/// A connection the handler was given stays open until it is cancelled (or its peer ends it);
/// `cancel()` stops listening and closes every connection still open.
public final class NWListener: Sendable, CustomDebugStringConvertible {
    /// The listener's states.
    public enum State: Sendable, Hashable {
        case setup
        case waiting(NWError)
        case ready
        case failed(NWError)
        case cancelled
    }

    /// The parameters the listener was made with; each connection gets the same stack.
    public let parameters: NWParameters
    private let requestedPort: NWEndpoint.Port
    private let stack: any ClassicBinding

    struct Shared {
        var newConnection: (@Sendable (NWConnection) -> Void)?
        var stateUpdate: (@Sendable (State) -> Void)?
        var limit = 10_000
        var queue: DispatchQueue?
        var state: State = .setup
        var port: NWEndpoint.Port?
        var task: Task<Void, Never>?
        var cancelled = false
        var service: Service?
        var serviceRegistrationUpdate: (@Sendable (ServiceRegistrationChange) -> Void)?
        var advertiser: ServiceAdvertiser?
    }
    let shared = Locked(Shared())

    /// A listener on `port` (`.any`: the system picks one; read `port` once ready) on every
    /// address, IPv4 and IPv6 (one dual-stack socket), or on `parameters.requiredLocalEndpoint`'s
    /// host, or on its Unix-domain socket file when it is `.unix(path:)` (TCP and TLS; `port`
    /// is then ignored and stays nil). Throws when the
    /// parameters describe no stack a listener runs.
    public init(using parameters: NWParameters, on port: NWEndpoint.Port) throws {
        self.parameters = parameters
        requestedPort = port
        let binding: any StackBinding
        do { binding = try parameters.stackBinding() } catch { throw NWError(NetworkError(error)) }
        guard let classic = binding as? any ClassicBinding else {
            throw NWError(.unsupported("\(type(of: binding)) on NWListener (TLS, TCP, UDP, DTLS and QUIC listen there; use NetworkListener for the others)"))
        }
        stack = classic
    }

    /// A listener on a port the system picks.
    public convenience init(using parameters: NWParameters) throws {
        try self.init(using: parameters, on: .any)
    }

    public var debugDescription: String { "NWListener on \(port.map { "\($0)" } ?? "\(requestedPort)") (\(parameters.debugDescription)): \(state)" }

    /// Called on the listener's queue with each inbound connection. Set it before `start(queue:)`.
    public var newConnectionHandler: (@Sendable (_ connection: NWConnection) -> Void)? {
        get { shared.withLock { $0.newConnection } }
        set { shared.withLock { $0.newConnection = newValue } }
    }

    /// Called on the listener's queue with every state change.
    public var stateUpdateHandler: (@Sendable (_ newState: State) -> Void)? {
        get { shared.withLock { $0.stateUpdate } }
        set { shared.withLock { $0.stateUpdate = newValue } }
    }

    /// Most connections open at once (default 10,000); see `NetworkListener.newConnectionLimit`.
    /// Set it before `start(queue:)`.
    public var newConnectionLimit: Int {
        get { shared.withLock { $0.limit } }
        set { shared.withLock { $0.limit = newValue } }
    }

    /// The port listened on, once ready.
    public var port: NWEndpoint.Port? { shared.withLock { $0.port } }

    /// The state now.
    public var state: State { shared.withLock { $0.state } }

    /// Starts listening; handlers run on `queue`. Calls after the first do nothing.
    public func start(queue: DispatchQueue) {
        let start = shared.withLock { shared -> Bool in
            guard shared.queue == nil, !shared.cancelled else { return false }
            shared.queue = queue
            return true
        }
        guard start else { return }
        guard newConnectionHandler != nil else {
            update(.failed(NWError(.invalidState("set newConnectionHandler before starting the listener"))))
            return
        }
        let task = Task { await run(stack) }
        let cancelled = shared.withLock { shared -> Bool in
            shared.task = task
            return shared.cancelled
        }
        if cancelled { task.cancel() }
    }

    /// Stops listening and closes every connection still open; the state becomes `cancelled`.
    public func cancel() {
        let task = shared.withLock { shared -> Task<Void, Never>? in
            shared.cancelled = true
            return shared.task
        }
        stopAdvertising()
        if let task {
            task.cancel()
        } else {
            update(.cancelled)
        }
    }

    private func run<Stack: ClassicBinding>(_ stack: Stack) async {
        let host = parameters.requiredLocalEndpoint.flatMap { endpoint -> NWEndpoint.Host? in
            if case .hostPort(let host, _) = endpoint { host } else { nil }
        }
        var listenerParameters = NetworkParameters(stack: stack)
        let constraints = parameters.networkParameters(stack: stack)
        if let interface = constraints.requiredInterface { listenerParameters = listenerParameters.requiredInterface(interface) }
        listenerParameters = listenerParameters.serviceClass(constraints.serviceClass).multipathServiceType(constraints.multipathServiceType)
        var endpoint = NWEndpoint.hostPort(host: host ?? .ipv6(.any), port: requestedPort)
        if case .unix = parameters.requiredLocalEndpoint { endpoint = parameters.requiredLocalEndpoint! }
        let listener = NetworkListener(for: endpoint, using: listenerParameters)
        listener.newConnectionLimit = newConnectionLimit
        let watcher = Task { [weak self] in
            for await state in listener.states {
                if state == .ready {
                    self?.shared.withLock { $0.port = listener.port }
                    self?.startAdvertising()
                }
                if state.isFinal { self?.stopAdvertising() }
                ClassicFailureLog.record(state, of: "NWListener")
                self?.update(State(state))
            }
        }
        let parameters = parameters
        do {
            try await listener.run { [weak self] connection in
                guard let self else { return }
                try await Stack.serve(connection) { [weak self] transfer in
                    guard let self else { return }
                    let inbound = NWConnection(inbound: transfer, endpoint: connection.endpoint, parameters: parameters)
                    let (queue, handler) = shared.withLock { ($0.queue, $0.newConnection) }
                    queue?.async { handler?(inbound) }
                }
            }
        } catch {
            let failure = NetworkError(error)
            ClassicFailureLog.record(.failed(failure), of: "NWListener")
            update(.failed(NWError(failure)))
        }
        await watcher.value
    }

    func update(_ state: State) {
        let delivery = shared.withLock { shared -> (DispatchQueue?, (@Sendable (State) -> Void)?)? in
            guard shared.state != state, !shared.state.isFinal else { return nil }
            shared.state = state
            return (shared.queue, shared.stateUpdate)
        }
        guard let (queue, handler) = delivery, let handler else { return }
        (queue ?? DispatchQueue.global()).async { handler(state) }
    }
}

extension NWListener.State {
    init(_ state: NetworkConnectionState) {
        switch state {
        case .setup, .preparing: self = .setup
        case .waiting(let error): self = .waiting(NWError(error))
        case .ready: self = .ready
        case .failed(let error): self = .failed(NWError(error))
        case .cancelled: self = .cancelled
        }
    }

    var isFinal: Bool {
        switch self {
        case .failed, .cancelled: true
        default: false
        }
    }
}
