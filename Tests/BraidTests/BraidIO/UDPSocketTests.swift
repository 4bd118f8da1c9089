import BraidIO
import BraidQUIC
import Glibc
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

    /// Sockets share send and receive memory from a pool, holding it only while they use it:
    /// a queue waiting for its flush keeps its bytes while other sockets send and receive, and
    /// an idle socket holds none.
    @Test func queuedBatchesKeepTheirBytesWhileOtherSocketsUseThePool() throws {
        let receiver = try UDPSocket(bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!)
        let first = try UDPSocket(bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!)
        let second = try UDPSocket(bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!)
        #expect(!first.holdsSendArea)
        func queue(_ socket: UDPSocket, _ byte: UInt8) {
            let bytes = [UInt8](repeating: byte, count: 100)
            bytes.withUnsafeBytes {
                socket.enqueue(DatagramMetadata(remote: receiver.localAddress, local: socket.localAddress), segmentSize: 100, bytes: $0)
            }
        }
        queue(first, 1)
        queue(first, 2)
        #expect(first.holdsSendArea)
        queue(second, 3)
        #expect(second.flush())
        #expect(!second.holdsSendArea)
        var received: [[UInt8]] = []
        // Until `count` datagrams arrived, each wait on the socket with a generous deadline.
        func drain(until count: Int) {
            while received.count < count {
                receiver.receive { bytes, _ in received.append(Array(bytes)) }
                guard received.count < count else { return }
                var ready = pollfd(fd: receiver.fd, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 60_000) == 1 else { return }
            }
        }
        drain(until: 1)
        #expect(first.flush())
        #expect(!first.holdsSendArea)
        drain(until: 3)
        let sorted = received.sorted { $0[0] < $1[0] }
        #expect(sorted == [[UInt8](repeating: 1, count: 100), [UInt8](repeating: 2, count: 100), [UInt8](repeating: 3, count: 100)])
    }
}
