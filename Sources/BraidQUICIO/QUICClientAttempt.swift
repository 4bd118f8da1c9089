import BraidIO
import BraidQUIC

/// One attempt of a QUIC client connection's establishment: a client driver with its own
/// socket, whose handshake races the other attempts' (Happy Eyeballs). Until a channel adopts
/// it, it reports only its outcome: connected (handshake completed) or failed (the engine's
/// error). Once adopted, every event of its engine goes to that channel, which the driver
/// serves as its transport.
package final class QUICClientAttempt {
    package enum Outcome {
        /// The handshake completed.
        case connected
        /// The connection closed before it was established.
        case failed(QUICError)
    }

    /// The address the attempt connects to.
    package let remoteAddress: SocketAddress
    /// Nil only while `init` runs (the driver's first pass can report events before it returns).
    private var driver: QUICClientDriver?
    /// Told of the outcome until adoption (or the attempt's end).
    private var onOutcome: ((QUICClientAttempt, Outcome, LoopContext) -> Void)?
    /// The channel that adopted the attempt. Events of the pass that adopted it still come
    /// through this attempt's handler (the driver took the handler before the pass began):
    /// they go on to the channel too.
    private var channel: QUICChannel?

    /// Starts a handshake to `remote` from `local` over a socket from `sockets`; `resumption`
    /// resumes a session (and lets 0-RTT data go before the handshake completes).
    package init(
        context: LoopContext, client: QUICClientContext, remote: SocketAddress, serverName: String,
        resumption: QUICResumptionTicket?, local: SocketAddress, batching: BatchingOptions,
        sockets: any DatagramSocketFactory, onOutcome: @escaping (QUICClientAttempt, Outcome, LoopContext) -> Void
    ) throws {
        remoteAddress = remote
        self.onOutcome = onOutcome
        // The handler holds the attempt (and through `onOutcome` the race) until the
        // connection is adopted or terminates, as the race's own handlers hold it.
        driver = try QUICClientDriver(
            context: context, client: client, remote: remote, serverName: serverName, resumption: resumption, local: local,
            batching: batching, sockets: sockets
        ) { [self] _, event in
            handle(event, context: context)
        }
    }

    private func handle(_ event: QUICEvent, context: LoopContext) {
        guard let driver else { return }
        if let channel {
            channel.handle(event, context: context)
            return
        }
        switch event {
        case .handshakeCompleted:
            onOutcome?(self, .connected, context)
            // Adopted just now: the channel hears the completion too.
            channel?.handle(event, context: context)
        case .connectionClosed(let error):
            onOutcome?(self, .failed(error), context)
        case .terminated:
            // The driver closes its socket itself once terminated; drop the handler's references.
            onOutcome = nil
            driver.onEvent = { _, _ in }
        default:
            break
        }
    }

    /// Hands the attempt's connection to `channel`, which gets its events from now on and
    /// writes through the attempt's driver. Calls that were waiting for the connection (a
    /// 0-RTT send) can go at once.
    package func adopt(into channel: QUICChannel, context: LoopContext) {
        guard let driver else { return }
        self.channel = channel
        onOutcome = nil
        // The driver and the channel keep each other until the connection terminates; then
        // the channel's release closes the socket and drops this handler.
        driver.onEvent = { [channel] _, event in channel.handle(event, context: context) }
        channel.attach(driver.connection, transport: driver, context: context)
        driver.service(context)
    }

    /// Gives the attempt up: its connection closes (application error code 0).
    package func abandon(_ context: LoopContext) {
        guard let driver else { return }
        driver.connection.close(applicationErrorCode: 0, reason: "", now: context.now)
        driver.service(context)
    }
}
