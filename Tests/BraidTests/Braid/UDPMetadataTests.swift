import BraidIO
import Foundation
import Testing

@testable import Braid

@Suite struct UDPMetadataTests {
    private let datagram = ReceivedDatagram(
        content: Data([1]),
        metadata: DatagramMetadata(remote: SocketAddress(ip: "192.0.2.1", port: 4000)!, local: SocketAddress(ip: "192.0.2.2", port: 5000)!))

    /// Metadata compares and hashes by its values, whether or not two share their endpoints'
    /// storage, and a changed copy leaves the original as it was.
    @Test func metadataIsAValue() {
        let shared = DatagramEndpointMemo(), other = DatagramEndpointMemo()
        let first = shared.metadata(for: datagram), again = shared.metadata(for: datagram), apart = other.metadata(for: datagram)
        #expect(first == again && first == apart)
        #expect(first.hashValue == apart.hashValue)
        #expect(first.remoteEndpoint == .hostPort(host: "192.0.2.1", port: 4000))
        #expect(first.localEndpoint == .hostPort(host: "192.0.2.2", port: 5000))

        var changed = first
        changed.remoteEndpoint = .hostPort(host: "192.0.2.9", port: 4000)
        #expect(changed != first)
        #expect(changed.localEndpoint == first.localEndpoint)
        #expect(first.remoteEndpoint == .hostPort(host: "192.0.2.1", port: 4000))
        var marked = first
        marked.ecn = .congestionExperienced
        #expect(marked != first && marked.remoteEndpoint == first.remoteEndpoint)
    }

    /// A datagram from another address gets that address's endpoints, not the last ones.
    @Test func endpointsFollowTheAddresses() {
        let memo = DatagramEndpointMemo()
        _ = memo.metadata(for: datagram)
        var moved = datagram
        moved.metadata.remote = SocketAddress(ip: "2001:db8::7", port: 4001)!
        #expect(memo.metadata(for: moved).remoteEndpoint == .hostPort(host: "2001:db8::7", port: 4001))
        #expect(memo.metadata(for: datagram).remoteEndpoint == .hostPort(host: "192.0.2.1", port: 4000))
        memo.unixEndpoint = .unix(path: "/tmp/game.socket")
        #expect(memo.metadata(for: datagram).remoteEndpoint == .unix(path: "/tmp/game.socket"))
    }
}
