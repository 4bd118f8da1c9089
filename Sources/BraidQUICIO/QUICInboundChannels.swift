import BraidIO
import BraidQUIC

/// One server loop's connections as channels: hands each new engine connection to `admit`,
/// which makes the public connection (with its own `QUICChannel`) and attaches the engine to
/// that channel, then gives the channel its connection's events. Lives on the loop; the
/// server driver calls `handle` for every event.
package final class QUICInboundChannels {
    /// Makes the channel of a new connection from `peer` and calls `attach` with it before it
    /// can hear any event; nil refuses the connection (the listener stopped taking new ones).
    package typealias Admit = (_ peer: SocketAddress, _ attach: (QUICChannel) -> Void) -> QUICChannel?

    private unowned let driver: QUICServerDriver
    private let context: LoopContext
    private let admit: Admit
    /// The channels of live connections (the public connections are their handlers' to keep).
    /// Read for every engine event, on the loop, and never held across a call that could
    /// reach it again: the run-time exclusivity check is left out.
    @exclusivity(unchecked) private var channels: [ObjectIdentifier: QUICChannel] = [:]
    /// Connections refused because the listener stopped after the endpoint took them: their
    /// remaining events go nowhere. Held (not only their identifiers) until they terminate,
    /// so a new connection cannot reuse an identifier still listed here.
    private var refused: [ObjectIdentifier: QUICConnection] = [:]
    /// Hears each handshake that ended before its connection reached the listener, with why.
    private let handshakeFailed: ((QUICError) -> Void)?
    /// Such handshakes already reported, until they terminate (at most the half-open ones).
    private var failedBeforeAdmission: Set<ObjectIdentifier> = []

    package init(driver: QUICServerDriver, context: LoopContext, handshakeFailed: ((QUICError) -> Void)? = nil, admit: @escaping Admit) {
        self.driver = driver
        self.context = context
        self.handshakeFailed = handshakeFailed
        self.admit = admit
    }

    package func handle(_ connection: QUICConnection, _ event: QUICEvent) {
        let key = ObjectIdentifier(connection)
        let channel: QUICChannel
        if let existing = channels[key] {
            channel = existing
        } else {
            if refused[key] != nil {
                if case .terminated = event { refused[key] = nil }
                return
            }
            switch event {
            case .connectionClosed(let error):
                // A handshake that ended before anything reached the application (abandoned,
                // refused, timed out): no connection object is made for it; only the
                // listener's metrics hear of it.
                if failedBeforeAdmission.insert(key).inserted { handshakeFailed?(error) }
                return
            case .terminated:
                if failedBeforeAdmission.remove(key) == nil { handshakeFailed?(connection.closeReason ?? QUICError.idleTimeout) }
                return
            default: break
            }
            let driver = driver, context = context
            let admitted = admit(connection.path.remote) { channel in
                channel.attach(
                    connection, transport: QUICServerConnectionTransport(driver: driver, connection: connection), context: context)
            }
            guard let admitted else {
                // The listener stopped after the endpoint took this client (the endpoint's own
                // refusal reaches it at the loop's next pass): refused the same way.
                connection.refuse(reason: QUICServerEndpoint.shuttingDownReason, now: context.now)
                refused[key] = connection
                driver.service(connection, context)
                return
            }
            channel = admitted
            channels[key] = channel
        }
        channel.handle(event, context: context)
        if case .terminated = event { channels[key] = nil }
    }
}
