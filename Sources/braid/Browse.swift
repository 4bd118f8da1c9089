import ArgumentParser
import Braid
import Foundation

/// `braid browse`: lists the DNS-SD services of a type as they come and go.
struct Browse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Browse for DNS-SD services of a type on the local network.",
        discussion: """
            Prints one JSON object per line: {"found": name, "interface": name, "txt": {…}} when a \
            service appears or changes, {"lost": name} when it goes. Runs until interrupted, or \
            --timeout seconds. Exit status 1 if browsing fails. BRAID_DISCOVERY_BACKEND chooses \
            avahi-daemon or Braid's own multicast DNS (see the ConnectivityOnLinux article).
            """)

    @Argument(help: "The service type, like _http._tcp.") var type: String
    @Option(help: "Stop after this many seconds (default: run until interrupted).") var timeout: Double?

    func run() async throws {
        // The new API's browser: a failure to start throws the NetworkError with its reason.
        let browser = NetworkBrowser(for: .bonjour(type, includeTxtRecord: true))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var shown: [String: String] = [:]
                for try await services in browser.updates() {
                    var now: [String: (line: [String: Any], text: String)] = [:]
                    for service in services {
                        let line = Self.describe(service.result)
                        let key = "\(line["found"] ?? "")\u{0}\(line["interface"] ?? "")"
                        let text = (try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? ""
                        now[key] = (line, text)
                    }
                    for (key, value) in now.sorted(by: { $0.key < $1.key }) where shown[key] != value.text {
                        printJSONLine(value.line)
                    }
                    for key in shown.keys.sorted() where now[key] == nil {
                        printJSONLine(["lost": String(key.prefix { $0 != "\u{0}" })])
                    }
                    shown = now.mapValues(\.text)
                }
            }
            group.addTask { try await Task.sleep(for: .seconds(timeout ?? 1e9)) }
            try await group.next()
            group.cancelAll()
        }
    }

    static func describe(_ result: NWBrowser.Result) -> [String: Any] {
        var line: [String: Any] = [:]
        if case .service(let name, let type, _, let interface) = result.endpoint {
            line["found"] = name
            line["type"] = type
            line["interface"] = interface?.name ?? ""
        }
        if case .bonjour(let txt) = result.metadata { line["txt"] = txt.dictionary }
        return line
    }
}

/// Waits until `failures` yields (then fails with it) or `timeout` seconds pass (nil: forever).
func untilFailureOrTimeout(_ failures: AsyncStream<NWError>, timeout: Double?) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            for await error in failures { throw CommandFailure("\(error)") }
        }
        group.addTask {
            try await Task.sleep(for: .seconds(timeout ?? 1e9))
        }
        try await group.next()
        group.cancelAll()
    }
}

/// Prints one JSON object as a line, at once (a test or a pipe reads it while the command runs).
func printJSONLine(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}
