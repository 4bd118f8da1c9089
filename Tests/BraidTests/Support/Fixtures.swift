import BraidQUIC
import Foundation

/// Test PKI made by tools/make-test-certs.sh.
enum Fixtures {
    static func path(_ name: String) -> String {
        Bundle.module.resourceURL!.appendingPathComponent("Fixtures").appendingPathComponent(name).path
    }

    static var caFile: String { path("ca.pem") }

    static func serverConfiguration(alpn: [String] = ["echo"], certificate: String = "server") -> QUICServerConfiguration {
        QUICServerConfiguration(
            alpn: alpn, certificateChainFile: path("\(certificate).pem"), privateKeyFile: path("\(certificate)-key.pem"))
    }

    static func server(
        alpn: [String] = ["echo"], certificate: String = "server", configure: (inout QUICServerConfiguration) -> Void = { _ in }
    ) throws -> QUICServerEndpoint {
        var configuration = serverConfiguration(alpn: alpn, certificate: certificate)
        configure(&configuration)
        return try QUICServerEndpoint(configuration: configuration)
    }

    static func client(
        alpn: [String] = ["echo"], configure: (inout QUICClientConfiguration) -> Void = { _ in }
    ) throws -> QUICClientContext {
        var configuration = QUICClientConfiguration(alpn: alpn)
        configuration.verification = QUICCertificateVerification(trustRoots: .certificateAuthorityFile(caFile))
        configure(&configuration)
        return try QUICClientContext(configuration: configuration)
    }
}

/// Bytes that depend on a seed and position, so misplaced or corrupted data is detected.
func pattern(seed: UInt64, count: Int) -> [UInt8] {
    var random = SeededRandom(seed: seed)
    var out = [UInt8]()
    out.reserveCapacity(count + 8)
    while out.count < count {
        withUnsafeBytes(of: random.next()) { out.append(contentsOf: $0) }
    }
    return Array(out.prefix(count))
}
