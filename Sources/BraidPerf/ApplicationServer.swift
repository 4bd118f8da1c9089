import Braid
import BraidCore
import Foundation

/// The server side of `braid serve`: runs the application the client chose (by ALPN) on one
/// connection until it ends.
package enum ApplicationServer {
    /// Serves `connection`; returns how it went (the `braid serve --json` line), or nil if it
    /// ended before the handshake. Streams are served as they arrive, so a resumed client's
    /// 0-RTT request is answered before the handshake completes.
    package static func serve(_ connection: NetworkConnection<QUIC>) async -> [String: Any]? {
        let exchanges = Locked<[PerfService.Exchange]>([])
        do {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask {
                    var datagrams = connection.datagrams.makeAsyncIterator()
                    // The first datagram comes after the handshake, so the ALPN is known then.
                    guard let first = await datagrams.next() else { return }
                    guard connection.negotiatedALPN == EchoService.alpn else {
                        while await datagrams.next() != nil {}  // perf ignores datagrams
                        return
                    }
                    try await EchoService.echo(first, on: connection)
                    while let datagram = await datagrams.next() { try await EchoService.echo(datagram, on: connection) }
                }
                try await connection.inboundStreams { stream in
                    // The ALPN is known by the time the first stream arrives.
                    if connection.negotiatedALPN == PerfService.alpn {
                        if let exchange = try await PerfService.serve(stream) { exchanges.withLock { $0.append(exchange) } }
                    } else {
                        try await EchoService.serve(stream)
                    }
                }
            }
        } catch {
            // How the connection ended is in its state, reported below.
        }
        guard let alpn = connection.negotiatedALPN else { return nil }
        var report: [String: Any] = [
            "event": "closed", "alpn": alpn, "remote": connection.remoteEndpoint.map { "\($0)" } ?? "",
            "early_data": connection.earlyDataAccepted, "state": "\(connection.state)",
        ]
        if case .failed(.peerClosed(let code, let reason)) = connection.state {
            report["error_code"] = code
            report["reason"] = reason
        }
        let served = exchanges.withLock { $0 }
        if alpn == PerfService.alpn {
            report["streams_ok"] = served.count
            report["bytes_uploaded"] = served.reduce(0) { $0 + $1.uploaded }
            report["upload_intact"] = served.allSatisfy(\.uploadIntact)
        }
        return report
    }
}
