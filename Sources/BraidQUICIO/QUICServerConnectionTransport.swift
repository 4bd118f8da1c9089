import BraidIO
import BraidQUIC

/// How a server connection's channel reaches the datapath: through the server driver that
/// serves every connection of its socket. The driver forgets a connection by itself once it
/// terminates, so releasing needs nothing here.
package final class QUICServerConnectionTransport: QUICChannelTransport {
    private unowned let driver: QUICServerDriver
    private let connection: QUICConnection

    package init(driver: QUICServerDriver, connection: QUICConnection) {
        self.driver = driver
        self.connection = connection
    }

    package func service(_ context: LoopContext) {
        driver.service(connection, context)
    }

    package func release(_ context: LoopContext) {}

    /// A listener's connections share its sockets: their system calls are the listener's.
    package var socketCounters: SocketCounters? { nil }

    package func moveToNewPath(_ context: LoopContext, device: String?) throws -> SocketAddress {
        throw QUICError.invalidState("only a client connection migrates")
    }
}
