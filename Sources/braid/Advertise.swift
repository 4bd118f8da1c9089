import ArgumentParser
import Braid
import Foundation

/// `braid advertise`: a TCP listener that advertises itself as a DNS-SD service.
struct Advertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise a DNS-SD service on the local network, on a TCP listener of its own.",
        discussion: """
            Listens on a TCP port the system picks (echoing what each connection sends) and \
            advertises it. With --txt-from-stdin, each line read from standard input replaces the \
            TXT record (key=value entries separated by spaces), announced under the same name. Prints one JSON object per line: {"listening": port}, then \
            {"registered": name} each time the service is advertised under a name (a name taken on \
            the network is renamed) and {"unregistered": name} when it no longer is. Runs until \
            interrupted, or --timeout seconds. Exit status 1 if advertising fails. \
            BRAID_DISCOVERY_BACKEND chooses avahi-daemon or Braid's own multicast DNS.
            """)

    @Argument(help: "The service type, like _http._tcp.") var type: String
    @Option(help: "The service's name (default: the host's name).") var name: String?
    @Option(help: "A TXT record entry, key=value (repeatable).") var txt: [String] = []
    @Option(help: "Stop after this many seconds (default: run until interrupted).") var timeout: Double?
    @Flag(name: .customLong("txt-from-stdin"), help: "Replace the TXT record with each line read from standard input (key=value entries separated by spaces).")
    var txtFromStandardInput = false

    static func entries(_ list: [String]) -> [String: String] {
        var entries: [String: String] = [:]
        for entry in list where !entry.isEmpty {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            entries[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return entries
    }

    func run() async throws {
        let service = NWListener.Service(name: name, type: type, txtRecord: NWTXTRecord(Self.entries(txt)))
        let listener = try NWListener(service: service, using: .tcp)
        let (failures, failed) = AsyncStream<NWError>.makeStream()
        listener.newConnectionHandler = { connection in
            connection.start(queue: .global())
            @Sendable func echo() {
                connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, error in
                    guard error == nil else {
                        connection.cancel()
                        return
                    }
                    if let content { connection.send(content: content, completion: .contentProcessed { _ in }) }
                    if isComplete { connection.send(content: nil, contentContext: .finalMessage, isComplete: true, completion: .contentProcessed { _ in connection.cancel() }) } else { echo() }
                }
            }
            echo()
        }
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
        if txtFromStandardInput {
            let (name, type) = (name, type)
            // readLine blocks: a thread of its own, for as long as standard input stays open.
            Thread.detachNewThread {
                while let line = readLine() {
                    let entries = Self.entries(line.split(separator: " ").map(String.init))
                    listener.service = NWListener.Service(name: name, type: type, txtRecord: NWTXTRecord(entries))
                }
            }
        }
        defer { listener.cancel() }
        try await untilFailureOrTimeout(failures, timeout: timeout)
    }
}
