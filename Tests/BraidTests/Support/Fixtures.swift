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

/// `count` bytes, byte `i` being `byte(i)`, written in place: a debug build's
/// `Data((0..<count).map(byte))` took 3 s for 20 MB (0.09 s this way), holding a thread of
/// the cooperative pool that every other test needed meanwhile.
func patternData(_ count: Int, _ byte: (Int) -> UInt8) -> Data {
    var data = Data(count: count)
    data.withUnsafeMutableBytes { raw in
        let bytes = raw.bindMemory(to: UInt8.self)
        var index = 0
        while index < count {
            bytes[index] = byte(index)
            index += 1
        }
    }
    return data
}

/// Bytes that depend on a seed and position, so misplaced or corrupted data is detected.
func pattern(seed: UInt64, count: Int) -> [UInt8] {
    var random = SeededRandom(seed: seed)
    // Word by word into the array's memory (appending byte arrays took seconds of a debug
    // build's time for the megabyte payloads, on whichever thread the test ran).
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        let raw = UnsafeMutableRawBufferPointer(buffer)
        var offset = 0
        while offset < count {
            let word = random.next()
            if count - offset >= 8 {
                raw.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
            } else {
                withUnsafeBytes(of: word) { bytes in
                    for index in 0..<(count - offset) { raw[offset + index] = bytes[index] }
                }
            }
            offset += 8
        }
        initialized = count
    }
}
