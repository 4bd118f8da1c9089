import Foundation
import Testing

@testable import Braid

/// `NWParameters` and the protocol options become the new API's stacks.
@Suite struct NWParametersTests {
    @Test func theDocExamplesBuildTheStacksTheySay() throws {
        let ipv6 = try #require(try docExample_NWProtocolIP().stackBinding() as? UDP)
        #expect(ipv6.ip.version == .v6)
        let tcp = try #require(try docExample_NWProtocolTCP().stackBinding() as? TCP)
        #expect(tcp.noDelay)
        #expect(tcp.keepalive?.idleTimeInSeconds == 30 && tcp.keepalive?.count == 9 && tcp.keepalive?.intervalInSeconds == 75)
        let tls = try #require(try docExample_NWProtocolTLS().stackBinding() as? TLS)
        #expect(tls.alpn == ["h2"] && tls.minimumVersion == .TLSv13)
        #expect(docExample_NWParameters().parameters.prohibitExpensivePaths)
    }

    @Test func theStandardParametersAreTheStacksOfTheirNames() throws {
        #expect(try NWParameters.tcp.stackBinding() is TCP)
        #expect(try NWParameters.tls.stackBinding() is TLS)
        #expect(try NWParameters.udp.stackBinding() is UDP)
        #expect(try (NWParameters.quic(alpn: ["h3"]).stackBinding() as? QUIC)?.alpn == ["h3"])
        #expect(throws: NetworkError.self) { try NWParameters().stackBinding() }
    }

    @Test func aCopyIsIndependent() throws {
        let original = NWParameters.tcp
        original.prohibitConstrainedPaths = true
        let copy = original.copy()
        (copy.defaultProtocolStack.transportProtocol as? NWProtocolTCP.Options)?.noDelay = true
        copy.prohibitConstrainedPaths = false
        #expect(original.prohibitConstrainedPaths)
        #expect((original.defaultProtocolStack.transportProtocol as? NWProtocolTCP.Options)?.noDelay == false)
        #expect(try (copy.stackBinding() as? TCP)?.noDelay == true)
    }

    /// TLS options over UDP are DTLS, as `NWParameters(dtls:udp:)` builds them.
    @Test func tlsOptionsOverUDPAreDTLS() throws {
        let parameters = NWParameters.udp
        let tls = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "coap")
        parameters.defaultProtocolStack.applicationProtocols = [tls]
        #expect(try (parameters.stackBinding() as? DTLS)?.alpn == ["coap"])
        #expect(try NWParameters.dtls.stackBinding() is DTLS)
        #expect(try NWParameters(dtls: nil).stackBinding() is UDP)
    }

    @Test func pathPreferencesReachTheNewParameters() {
        let parameters = NWParameters.tcp
        parameters.requiredInterfaceType = .wiredEthernet
        parameters.prohibitedInterfaceTypes = [.cellular]
        parameters.serviceClass = .background
        parameters.requiredLocalEndpoint = .hostPort(host: "127.0.0.1", port: 5000)
        let converted = parameters.networkParameters(stack: TCP())
        #expect(converted.requiredInterfaceType == .wiredEthernet)
        #expect(converted.prohibitedInterfaceTypes == [.cellular])
        #expect(converted.serviceClass == .background)
        #expect(converted.localEndpoint == .hostPort(host: "127.0.0.1", port: 5000))
    }
}
