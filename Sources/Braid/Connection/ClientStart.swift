import BraidIO

/// What a stack's binding needs to start a client connection: the connection's core, where it
/// goes, and the parameters every stack reads. Made by `NetworkConnection.start()`.
struct ClientStart {
    let core: LoopBound<ConnectionCore>
    let endpoint: NWEndpoint
    /// Where the parameters ask to send from (nil: the system chooses).
    let local: NWEndpoint?
    let serviceClass: NWParameters.ServiceClass
    let multipath: NWParameters.MultipathServiceType
    /// TCP Fast Open asked for by the parameters (TCP and TLS stacks apply it).
    let fastOpenAllowed: Bool
    let constraints: InterfaceConstraints
    /// Where the connection's sockets come from (UDP for QUIC and UDP, TCP for TLS and TCP).
    let sockets: any DatagramSocketFactory
    let streamSockets: any ByteStreamSocketFactory

    var loop: EventLoop { core.loop }

    /// Throws `unsupported` when the parameters ask for Multipath TCP, for stacks that are
    /// not TCP (`stack` names them in the message).
    func requireNoMultipath(on stack: String) throws {
        if multipath != .disabled {
            throw NetworkError.unsupported("multipathServiceType on \(stack) (TCP and TLS stacks apply it)")
        }
    }

    /// The UDP sockets of a QUIC or UDP connection: marking their datagrams with the service
    /// class's DSCP code point when it is not best effort.
    func datagramSockets() throws -> any DatagramSocketFactory {
        guard serviceClass != .bestEffort else { return sockets }
        do { return try sockets.markingDSCP(serviceClass.dscp) } catch { throw NetworkError(error) }
    }

    /// Races the endpoint's addresses on the connection's loop with the strategy `strategy`
    /// makes for the core (see `ClientEstablishment`). `migratesWhenPathGoesAway`: the
    /// connection moves to another allowed interface by itself when its own goes away (QUIC).
    func begin(
        migratesWhenPathGoesAway: Bool = false,
        strategy: @escaping @Sendable (ConnectionCore) -> any EstablishmentStrategy
    ) {
        let core = core, endpoint = endpoint, local = local, constraints = constraints
        loop.execute { context in
            core.value.handshakeStarted()
            if migratesWhenPathGoesAway {
                let watch = core.value.pathWatch(constraints: constraints)
                watch.migratesWhenPathGoesAway = true
                watch.arm(context)
            }
            let race = ClientEstablishment(
                core: core.value, strategy: strategy(core.value), endpoint: endpoint, local: local, constraints: constraints)
            core.value.establishment = race
            race.begin(context)
        }
    }
}
