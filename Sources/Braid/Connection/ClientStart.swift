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

    /// Throws `unsupported` when the parameters ask for a service class or Multipath TCP, for
    /// stacks that cannot apply them (`stack` names them in the message).
    func requireNoServiceClassOrMultipath(on stack: String) throws {
        if serviceClass != .bestEffort || multipath != .disabled {
            throw NetworkError.unsupported("serviceClass and multipathServiceType on \(stack) (TCP and TLS stacks apply them)")
        }
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
