import Braid
import Foundation
import Synchronization

/// The server side of `braid serve`: runs the application the client chose (by ALPN) on one
/// connection until it ends.
public enum ApplicationServer {
    /// Serves `connection`; returns how it went (the `braid serve --json` line), or nil if it
    /// never became ready.
    public static func serve(_ connection: NetworkConnection<QUIC>) async -> [String: Any]? {
        guard await becomesReady(connection) else { return nil }
        let exchanges = Mutex<[PerfService.Exchange]>([])
        let alpn = connection.negotiatedALPN ?? ""
        do {
            if alpn == PerfService.alpn {
                try await PerfService.serve(connection) { exchange in exchanges.withLock { $0.append(exchange) } }
            } else {
                try await EchoService.serve(connection)
            }
        } catch {
            // How the connection ended is in its state, reported below.
        }
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
