import Braid
import Testing

// This file imports Braid and nothing else that brings Foundation or Dispatch: a file written
// against Network.framework without its own `import Foundation` names Data, URL and
// DispatchQueue, and must compile with `import Braid` in place of `import Network`.

private func classicGreeting(to host: String) -> NWConnection {
    let connection = NWConnection(host: NWEndpoint.Host(host), port: 443, using: .tls)
    connection.start(queue: DispatchQueue(label: "greeting"))
    connection.send(content: Data("hello".utf8), completion: .contentProcessed { _ in })
    return connection
}

@Suite struct ImportBraidAloneTests {
    /// Foundation's and Dispatch's names resolve through `import Braid` alone.
    @Test func foundationAndDispatchNamesComeWithBraid() {
        let endpoint = NWEndpoint.url(URL(string: "wss://example.com/chat")!)
        #expect("\(endpoint)".contains("example.com"))
        let queue = DispatchQueue(label: "probe")
        #expect(queue.sync { Data("ok".utf8).count } == 2)
    }
}
