/// How every server group binds (UDP's, TCP's, QUIC's): one socket per loop on one port, bound
/// in turn. The first loop's socket fixes the address (with the port the kernel chose, if 0
/// was asked for) and each later loop binds that same address, the sockets sharing the port
/// through SO_REUSEPORT when there are several loops. If a loop fails to bind, what the earlier
/// loops made is closed and the error thrown.
package enum PerLoopBinding {
    /// Runs `bind` on each loop in turn with the loop's index and the address to bind; it
    /// returns what the loop keeps (on that loop) and the address it bound. Returns those, in
    /// the order of `loops`, and the address they share; on a failure, `close` gets those made
    /// so far.
    package static func bind<Member, Address: Sendable>(
        loops: [EventLoop], to address: Address,
        _ bind: @escaping @Sendable (_ index: Int, _ address: Address, _ context: LoopContext) throws -> (Member, Address),
        closingOnFailure close: ([LoopBound<Member>]) async -> Void
    ) async throws -> (members: [LoopBound<Member>], address: Address) {
        var members: [LoopBound<Member>] = []
        var bound = address
        do {
            for (index, loop) in loops.enumerated() {
                let target = bound
                let (member, local) = try await loop.submit { context in
                    let (member, local) = try bind(index, target, context)
                    return (LoopBound(member, on: context.loop), local)
                }
                members.append(member)
                bound = local
            }
        } catch {
            await close(members)
            throw error
        }
        return (members, bound)
    }
}
