import BraidIO
import BraidQUIC

/// One QUIC server spread over several event loops (one per core): each loop has its own
/// SO_REUSEPORT socket on the shared port and its own endpoint, and every connection lives on
/// exactly one loop for its whole life.
///
/// Routing: endpoint `i` puts the byte `i` into every connection ID it issues (first, or after
/// a load balancer's part: `QUICConnectionIDFormat.steeringOffset`), and a classic-BPF program
/// on the port makes the kernel deliver each short-header packet to socket `i` of the group. Long-header packets (handshake) go by the kernel's 4-tuple hash, which is
/// stable while the client's address is. So a client that migrates to a new address stays on
/// its loop, where a hash alone would land it on a loop that does not know it.
///
/// The endpoints share `QUICServerKeys`: a ticket or token issued on one loop works on another,
/// and a 0-RTT replay to a second loop is still caught.
///
/// ```swift
/// let loops = try (0..<2).map { try EventLoop(name: "server-\($0)") }
/// let group = try await QUICServerGroup.start(
///     loops: loops, configuration: configuration, bindTo: QUICAddress(ip: "0.0.0.0", port: 4433)!
/// ) { driver, context in { connection, event in /* runs on the driver's loop */ } }
/// ```
package final class QUICServerGroup: Sendable {
    /// The address all sockets share (with the port the kernel chose, if 0 was asked for).
    package let localAddress: QUICAddress
    /// One driver per loop, in the order of `loops`.
    package let drivers: [LoopBound<QUICServerDriver>]

    private init(localAddress: QUICAddress, drivers: [LoopBound<QUICServerDriver>]) {
        self.localAddress = localAddress
        self.drivers = drivers
    }

    /// Binds one socket per loop and starts serving.
    /// - Parameter makeHandler: called on each loop with that loop's driver (its endpoint's
    ///   `connectionIDTag` is the loop's index) and context; returns the loop's event handler.
    package static func start(
        loops: [EventLoop], configuration: QUICServerConfiguration, bindTo address: QUICAddress,
        batching: BatchingOptions = .all, makeHandler: @escaping @Sendable (QUICServerDriver, LoopContext) -> QUICEventHandler
    ) async throws -> QUICServerGroup {
        try await start(
            loops: loops, configuration: configuration, bindTo: address, batching: batching, sockets: UDPSockets(),
            makeHandler: makeHandler)
    }

    /// As above, with sockets from `sockets` (an in-memory network, in tests).
    package static func start(
        loops: [EventLoop], configuration: QUICServerConfiguration, bindTo address: QUICAddress,
        batching: BatchingOptions = .all, sockets: any DatagramSocketFactory,
        makeHandler: @escaping @Sendable (QUICServerDriver, LoopContext) -> QUICEventHandler
    ) async throws -> QUICServerGroup {
        guard !loops.isEmpty, loops.count <= 256 else {
            throw QUICError.configuration("a server group needs 1 to 256 loops, not \(loops.count)")
        }
        let keys = try QUICServerKeys(for: configuration)
        let (drivers, bound) = try await PerLoopBinding.bind(loops: loops, to: address) { index, target, context throws -> (QUICServerDriver, QUICAddress) in
            let endpoint = try QUICServerEndpoint(configuration: configuration, keys: keys, connectionIDTag: UInt8(index))
            // One loop needs no port sharing; leaving SO_REUSEPORT off then makes a second
            // server on the same port fail with EADDRINUSE instead of joining the group.
            let driver = try QUICServerDriver(
                context: context, endpoint: endpoint, bindTo: target, batching: batching, reusePort: loops.count > 1,
                sockets: sockets
            ) { _, _ in }
            driver.onEvent = makeHandler(driver, context)
            // Socket `index` joins the group at position `index` because they bind in order;
            // the program applies to the whole group once attached.
            if index == 0 && loops.count > 1 {
                do {
                    try (driver.socket as? UDPSocket)?.attachConnectionIDSteering(offset: configuration.connectionIDFormat.steeringOffset)
                } catch {
                    driver.close(context)
                    throw error
                }
            }
            return (driver, driver.localAddress)
        } closingOnFailure: { await close($0) }
        return QUICServerGroup(localAddress: bound, drivers: drivers)
    }

    /// Refuses new clients from now on (CONNECTION_REFUSED, see
    /// `QUICServerEndpoint.isAcceptingNewConnections`); connections already accepted carry on.
    /// Returns at once: each loop applies it at its next pass.
    package func stopAccepting() {
        for driver in drivers {
            driver.loop.execute { _ in driver.value.endpoint.isAcceptingNewConnections = false }
        }
    }

    /// Closes every connection (application error code 0, sent to the peers) and every socket.
    package func close() async {
        await Self.close(drivers)
    }

    private static func close(_ drivers: [LoopBound<QUICServerDriver>]) async {
        for driver in drivers {
            _ = try? await driver.loop.submit { context in
                driver.value.closeAllConnections(context)
                driver.value.close(context)
            }
        }
    }
}
