import BraidCore

/// The life of a connection (and, with the same cases, of a listener).
///
/// `setup` → `preparing` → `ready` → `cancelled` is the usual path. `waiting(error)` means no
/// usable path right now; the connection retries by itself, so react to it instead of checking
/// reachability first. `failed` and `cancelled` are final.
///
/// ```swift
/// connection.onStateUpdate { connection, state in
///     switch state {
///     case .ready: print("connected to \(connection.endpoint)")
///     case .waiting(let error): print("no path yet: \(error)")
///     case .failed(let error): print("failed: \(error)")
///     default: break
///     }
/// }
/// ```
public enum NetworkConnectionState: Sendable, Hashable, CustomStringConvertible {
    /// Not started yet: no `start()` and no call that needs the connection.
    case setup
    /// Resolving the name and handshaking (a listener: binding).
    case preparing
    /// No usable path now (no route, network down); this error says why. The connection
    /// retries by itself, going back to `preparing`.
    case waiting(NetworkError)
    /// The handshake is complete: streams and datagrams flow (a listener: accepting).
    case ready
    /// Ended by this error. Final.
    case failed(NetworkError)
    /// Closed by `cancel()` (a listener: its `run` task was cancelled). Final.
    case cancelled

    /// True for `failed` and `cancelled`: the state never changes again.
    public var isFinal: Bool {
        switch self {
        case .failed, .cancelled: true
        default: false
        }
    }

    /// The case name, with the error for `waiting` and `failed`: `waiting(No response from ...)`.
    public var description: String {
        switch self {
        case .setup: "setup"
        case .preparing: "preparing"
        case .waiting(let error): "waiting(\(error))"
        case .ready: "ready"
        case .failed(let error): "failed(\(error))"
        case .cancelled: "cancelled"
        }
    }
}

/// A state value that many tasks watch: the current value, `AsyncStream` subscribers and one
/// callback. Shared by connections and listeners.
final class StateBroadcast: Sendable {
    private struct Inner {
        var state: NetworkConnectionState = .setup
        var subscribers: [Int: AsyncStream<NetworkConnectionState>.Continuation] = [:]
        var nextID = 0
        var onUpdate: (@Sendable (NetworkConnectionState) -> Void)?
    }
    private let inner = Locked(Inner())

    var current: NetworkConnectionState { inner.withLock { $0.state } }

    /// Moves to `state` unless already final; returns false if the move was refused.
    @discardableResult
    func update(_ state: NetworkConnectionState) -> Bool {
        typealias Listeners = ([AsyncStream<NetworkConnectionState>.Continuation], (@Sendable (NetworkConnectionState) -> Void)?)
        let listeners = inner.withLock { inner -> Listeners? in
            guard !inner.state.isFinal, inner.state != state else { return nil }
            inner.state = state
            let subscribers = Array(inner.subscribers.values)
            if state.isFinal { inner.subscribers.removeAll() }
            return (subscribers, inner.onUpdate)
        }
        guard let (subscribers, handler) = listeners else { return false }
        for subscriber in subscribers {
            subscriber.yield(state)
            if state.isFinal { subscriber.finish() }
        }
        handler?(state)
        return true
    }

    /// The current state, then every change; finishes after a final state.
    func stream() -> AsyncStream<NetworkConnectionState> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let (state, id) = inner.withLock { inner -> (NetworkConnectionState, Int?) in
                guard !inner.state.isFinal else { return (inner.state, nil) }
                let id = inner.nextID
                inner.nextID += 1
                inner.subscribers[id] = continuation
                return (inner.state, id)
            }
            continuation.yield(state)
            guard let id else {
                continuation.finish()
                return
            }
            continuation.onTermination = { [weak self] _ in
                _ = self?.inner.withLock { $0.subscribers.removeValue(forKey: id) }
            }
        }
    }

    func setHandler(_ handler: (@Sendable (NetworkConnectionState) -> Void)?) {
        inner.withLock { $0.onUpdate = handler }
    }
}
