import BraidCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct SocketAddressTests {
    /// Equality compares family, port and every address byte the family has: addresses that
    /// differ in any one of them differ, and equal ones hash alike (a listener finds its peers
    /// in a dictionary by address).
    @Test func equalityCoversEveryMeaningfulField() throws {
        let v4 = try #require(SocketAddress(ip: "192.0.2.1", port: 4433))
        #expect(v4 == SocketAddress(ip: "192.0.2.1", port: 4433))
        #expect(v4 != SocketAddress(ip: "192.0.2.2", port: 4433))
        #expect(v4 != SocketAddress(ip: "192.0.2.1", port: 4434))
        #expect(v4 != SocketAddress(ip: "::ffff:192.0.2.1", port: 4433))
        #expect(v4.unmappingIPv4 == v4)
        #expect(SocketAddress(ip: "::ffff:192.0.2.1", port: 4433)?.unmappingIPv4 == v4)

        let v6 = try #require(SocketAddress(ip: "2001:db8::1", port: 4433))
        #expect(v6 == SocketAddress(ip: "2001:db8::1", port: 4433))
        // Addresses differing only in their last or first half.
        #expect(v6 != SocketAddress(ip: "2001:db8::2", port: 4433))
        #expect(v6 != SocketAddress(ip: "2001:db9::1", port: 4433))
        #expect(v6 != SocketAddress(ip: "2001:db8::1", port: 4434))
        var scoped = v6
        scoped.storage.sin6_scope_id = 2
        #expect(v6 != scoped)
        var flowing = v6
        flowing.storage.sin6_flowinfo = 7
        #expect(v6 != flowing)

        let peers: [SocketAddress: Int] = [v4: 4, v6: 6, scoped: 2]
        #expect(peers[try #require(SocketAddress(ip: "192.0.2.1", port: 4433))] == 4)
        #expect(peers[try #require(SocketAddress(ip: "2001:db8::1", port: 4433))] == 6)
        #expect(peers[scoped] == 2)
        #expect(peers[try #require(SocketAddress(ip: "2001:db8::2", port: 4433))] == nil)
    }
}
