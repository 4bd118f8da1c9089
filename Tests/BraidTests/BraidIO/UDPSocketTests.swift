import BraidIO
import BraidQUIC
import Testing

/// The UDP socket on its own.
@Suite struct UDPSocketTests {
    /// A closed socket never reads again (its descriptor number may already be another file's):
    /// no system call is made.
    @Test func aClosedSocketDoesNotReceive() throws {
        let socket = try UDPSocket(bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!)
        #expect(!socket.receive { _, _ in })
        let callsWhileOpen = socket.counters.recvmmsgCalls + socket.counters.recvmsgCalls
        #expect(callsWhileOpen == 1)
        socket.close()
        #expect(!socket.receive { _, _ in })
        #expect(socket.counters.recvmmsgCalls + socket.counters.recvmsgCalls == callsWhileOpen)
    }
}
