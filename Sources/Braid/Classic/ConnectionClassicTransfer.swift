import Foundation

/// The classic API's view of one whole new-API connection (TCP, TLS, UDP, DTLS, WebSocket, a
/// custom framer): the connection's own parts (state, starting and cancelling, endpoints,
/// paths), which every such view passes to its connection alike.
protocol ConnectionClassicTransfer: ClassicTransfer {
    associatedtype Stack: NetworkProtocol
    var connection: NetworkConnection<Stack> { get }
}

extension ConnectionClassicTransfer {
    var states: StateBroadcast { connection.shared.states }
    func start() { connection.start() }
    func cancel() { connection.cancel() }
    func forceCancel() { connection.forceCancel() }
    func restart() { connection.retryNow() }
    func cancelCurrentEndpoint() { connection.tryNextEndpoint() }

    var currentPath: NWPath? { connection.currentPath }
    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void) { connection.onPathUpdate { _, path in handler(path) } }
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onViabilityUpdate { _, viable in handler(viable) } }
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onBetterPathUpdate { _, better in handler(better) } }
}
