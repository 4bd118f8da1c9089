import ArgumentParser
import Braid
import Foundation

/// `braid advertise`: a TCP listener that advertises itself as a DNS-SD service.
struct Advertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise a DNS-SD service on the local network, on a TCP listener of its own.",
        discussion: """
            Listens on a TCP port the system picks (closing every connection it gets) and \
            advertises it. Prints one JSON object per line: {"listening": port}, then \
            {"registered": name} each time the service is advertised under a name (a name taken on \
            the network is renamed) and {"unregistered": name} when it no longer is. Runs until \
            interrupted, or --timeout seconds. Exit status 1 if advertising fails. \
            BRAID_DISCOVERY_BACKEND chooses avahi-daemon or Braid's own multicast DNS.
            """)

    @Argument(help: "The service type, like _http._tcp.") var type: String
    @Option(help: "The service's name (default: the host's name).") var name: String?
    @Option(help: "A TXT record entry, key=value (repeatable).") var txt: [String] = []
    @Option(help: "Stop after this many seconds (default: run until interrupted).") var timeout: Double?

    func run() async throws {
        var entries: [String: String] = [:]
        for entry in txt {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            entries[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        let listener = try NWListener(service: NWListener.Service(name: name, type: type, txtRecord: NWTXTRecord(entries)), using: .tcp)
        let (failures, failed) = AsyncStream<NWError>.makeStream()
        listener.newConnectionHandler = { connection in connection.cancel() }
        listener.stateUpdateHandler = { state in
            switch state {
            case .ready: printJSONLine(["listening": Int(listener.port?.rawValue ?? 0)])
            case .failed(let error): failed.yield(error)
            default: break
            }
        }
        listener.serviceRegistrationUpdateHandler = { change in
            switch change {
            case .add(.service(let name, _, _, _)): printJSONLine(["registered": name])
            case .remove(.service(let name, _, _, _)): printJSONLine(["unregistered": name])
            default: break
            }
        }
        listener.start(queue: DispatchQueue(label: "braid.advertise"))
        defer { listener.cancel() }
        try await untilFailureOrTimeout(failures, timeout: timeout)
    }
}
