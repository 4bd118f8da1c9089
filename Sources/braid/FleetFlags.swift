import ArgumentParser
import Braid
import Foundation

/// `braid serve`'s options for running behind a QUIC-aware load balancer, one of several
/// servers: the connection-ID layout the balancer reads, and the keys the servers share.
struct FleetFlags: ParsableArguments {
    @Option(
        name: .customLong("cid-format"),
        help: ArgumentHelp(
            "Connection IDs for a load balancer: random, quic-lb:ROTATION:SERVER-ID:NONCE-LENGTH[:KEY], or katran:v1|v2|v3:SERVER-ID.",
            discussion: "SERVER-ID and KEY in hex for quic-lb (KEY: 16 bytes, the balancer's; without it the server ID is in clear), decimal for katran.",
            valueName: "format"))
    var connectionIDFormat: ConnectionIDFormatArgument = .init(format: .random, text: "random")

    @Option(
        name: .customLong("fleet-keys"),
        help: ArgumentHelp(
            "A file of shared secrets (one per line in hex, the minting one first) for session tickets, address tokens and stateless resets; SIGHUP reads it again.",
            valueName: "file"))
    var fleetKeysFile: String?

    @Option(name: .customLong("fleet-key-overlap"), help: "Seconds a secret removed from --fleet-keys stays accepted.")
    var fleetKeyOverlap = 3600

    var isDefault: Bool { connectionIDFormat.text == "random" && fleetKeysFile == nil }

    func validate() throws {
        guard fleetKeyOverlap >= 0 else { throw ValidationError("--fleet-key-overlap must be at least 0") }
    }

    /// The keys from `--fleet-keys`, read now (nil without the option).
    func loadKeys() throws -> QUIC.FleetKeys? {
        guard let fleetKeysFile else { return nil }
        do {
            return try QUIC.FleetKeys(contentsOfFile: fleetKeysFile, overlap: .seconds(fleetKeyOverlap))
        } catch {
            throw CommandFailure("--fleet-keys \(fleetKeysFile): \(error)")
        }
    }
}

/// A parsed `--cid-format` value.
struct ConnectionIDFormatArgument: ExpressibleByArgument {
    let format: QUIC.ConnectionIDFormat
    let text: String

    init(format: QUIC.ConnectionIDFormat, text: String) {
        self.format = format
        self.text = text
    }

    init?(argument: String) {
        guard let format = Self.parse(argument) else { return nil }
        self.init(format: format, text: argument)
    }

    var defaultValueDescription: String { text }

    private static func parse(_ text: String) -> QUIC.ConnectionIDFormat? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        switch parts.first {
        case "random" where parts.count == 1:
            return .random
        case "quic-lb" where parts.count == 4 || parts.count == 5:
            guard let rotation = Int(parts[1]), let serverID = hexBytes(parts[2]), let nonceLength = Int(parts[3]) else { return nil }
            var key: Data?
            if parts.count == 5 {
                guard let bytes = hexBytes(parts[4]) else { return nil }
                key = bytes
            }
            return .quicLB(configRotation: rotation, serverID: serverID, nonceLength: nonceLength, key: key)
        case "katran" where parts.count == 3:
            let versions: [String: QUIC.ConnectionIDFormat.KatranVersion] = ["v1": .v1, "v2": .v2, "v3": .v3]
            guard let version = versions[parts[1]], let serverID = UInt32(parts[2]) else { return nil }
            return .katran(version: version, serverID: serverID)
        default:
            return nil
        }
    }

    /// Bytes from an even number of hex digits (an optional 0x prefix), or nil.
    private static func hexBytes(_ text: String) -> Data? {
        let digits = Array(text.hasPrefix("0x") ? text.dropFirst(2) : Substring(text))
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes = Data()
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(digits[index...index + 1]), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}

/// Reads the fleet key file again on SIGHUP, so keys rotate without a restart; a file that
/// does not parse leaves the keys as they were, and says so on standard error.
final class FleetKeyReloader {
    private let source: any DispatchSourceSignal

    init(_ keys: QUIC.FleetKeys) {
        // The dispatch source sees the signal only while its default action (exit) is off.
        signal(SIGHUP, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler {
            do {
                try keys.reload()
                FileHandle.standardError.write(Data("braid: SIGHUP: fleet keys read again from \(keys.file ?? "")\n".utf8))
            } catch {
                FileHandle.standardError.write(Data("braid: SIGHUP: fleet keys kept as they were: \(error)\n".utf8))
            }
        }
        source.resume()
    }

    func stop() { source.cancel() }
}
