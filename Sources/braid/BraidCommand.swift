import ArgumentParser
import Braid
import BraidIO
import BraidPerf
import Foundation

/// `braid`: serves and drives the perf and echo applications over Braid's QUIC and its other
/// stacks (`--stack`).
@main
struct BraidCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "braid",
        abstract: "Braid's stacks: serve and drive the perf and echo applications over QUIC, TLS, TCP, UDP, DTLS and WebSocket, and HTTP/3.",
        subcommands: [Serve.self, Client.self, Get.self, Browse.self, Advertise.self, Connect.self])
}

/// The batching switches both commands take.
struct BatchingFlags: ParsableArguments {
    @Flag(name: .customLong("no-gso"), help: "Send one datagram per message instead of UDP_SEGMENT batches.")
    var noGSO = false
    @Flag(name: .customLong("no-gro"), help: "Receive one datagram per message instead of UDP_GRO coalescing.")
    var noGRO = false
    @Flag(name: .customLong("no-mmsg"), help: "One message per sendmsg/recvmsg call instead of sendmmsg/recvmmsg.")
    var noMMsg = false
    @Flag(name: .customLong("no-batching"), help: "All three of the above.")
    var noBatching = false

    var options: BatchingOptions {
        BatchingOptions(
            segmentationOffload: !(noGSO || noBatching), receiveOffload: !(noGRO || noBatching),
            multiMessage: !(noMMsg || noBatching))
    }
}

/// A command-line failure: printed as `braid: <message>`, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension ApplicationStack: ExpressibleByArgument {}

extension NWEndpoint.Port: ExpressibleByArgument {
    public init?(argument: String) {
        guard let value = UInt16(argument) else { return nil }
        self.init(integerLiteral: value)
    }
}

/// Checks that a file the user named can be read, so the error names the flag.
func readableFile(_ path: String, flag: String) throws -> String {
    guard FileManager.default.isReadableFile(atPath: path) else {
        throw ValidationError("\(flag) \(path): no such readable file")
    }
    return path
}
