import BraidDiscoveryIO
import Glibc
import Testing

/// How the avahi-daemon back end turns an interface policy into Avahi's interface indexes.
struct AvahiInterfacePolicyTests {
    static var loopbackIndex: Int32 { Int32(if_nametoindex("lo")) }
    /// AVAHI_IF_UNSPEC (an AvahiIfIndex is a C int).
    static let avahiAnyInterface: Int32 = -1

    @Test func aPolicyPublishesOnEachInterfaceItAllowsOnly() throws {
        let lo = Self.loopbackIndex
        try #require(lo > 0, "this host has no interface named lo")
        let onlyLoopback: @Sendable (Int32, String) -> Bool = { _, name in name == "lo" }
        let none: @Sendable (Int32, String) -> Bool = { _, _ in false }
        #expect(AvahiDiscovery.allowedInterfaces(onlyLoopback) == [lo])
        #expect(AvahiDiscovery.allowedInterfaces(none).isEmpty)
        let every = AvahiDiscovery.allowedInterfaces(nil)
        #expect(every.contains(lo))
        #expect(every == every.sorted())
    }

    @Test func browseResultsAreKeptByTheirInterface() throws {
        let lo = Self.loopbackIndex
        try #require(lo > 0, "this host has no interface named lo")
        let onlyLoopback: @Sendable (Int32, String) -> Bool = { index, name in index == lo && name == "lo" }
        #expect(AvahiDiscovery.allows(onlyLoopback, lo))
        let allButLoopback: @Sendable (Int32, String) -> Bool = { _, name in name != "lo" }
        let every: @Sendable (Int32, String) -> Bool = { _, _ in true }
        #expect(!AvahiDiscovery.allows(allButLoopback, lo))
        // Avahi's "any interface" and an index no interface has pass only without a policy.
        #expect(!AvahiDiscovery.allows(onlyLoopback, Self.avahiAnyInterface))
        #expect(AvahiDiscovery.allows(nil, Self.avahiAnyInterface))
        #expect(!AvahiDiscovery.allows(every, Int32.max))
    }
}
