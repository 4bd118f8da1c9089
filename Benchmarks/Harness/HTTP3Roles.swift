import Braid
import BraidPerf
import Foundation
import HTTPTypes

extension Roles {
    /// `http3-client`: `--requests` GETs of `--path` (`/N`: N bytes) from 127.0.0.1:`--port`,
    /// `--concurrency` in flight on one connection (`HTTP3Client` keeps one per origin; a first
    /// request sets it up, outside the timing). Prints `{"requests", "seconds"}`.
    static func http3Client(_ flags: Flags) async throws {
        let requests = flags.int("requests", 10_000), concurrency = max(1, flags.int("concurrency", 100))
        let path = flags["path"] ?? "/1024", port = flags["port"] ?? ""
        let expected = Int(path.dropFirst())
        let quic = QUIC(alpn: ["h3"]).trust(.certificateAuthorities(file: flags["ca"] ?? "")).serverName("localhost")
        let client = HTTP3Client(quic: quic)
        let request = HTTPRequest(method: .get, scheme: "https", authority: "127.0.0.1:\(port)", path: path)
        _ = try await client.data(for: request)
        let start = ContinuousClock.now
        // Each worker makes its share, one after another: `concurrency` requests in flight.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                let share = requests / concurrency + (worker < requests % concurrency ? 1 : 0)
                group.addTask {
                    for _ in 0..<share {
                        let (body, response) = try await client.data(for: request)
                        guard response.status.code == 200, expected == nil || body.count == expected else {
                            throw ApplicationFailure("GET \(path): status \(response.status.code), \(body.count) bytes")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let seconds = (ContinuousClock.now - start).seconds
        client.close()
        printJSON(["requests": requests, "seconds": seconds])
    }
}
