import BraidQUIC

#if canImport(Glibc)
import Glibc
#endif

// The perf exchange (after draft-banks-quic-performance), shared by the tests, the benchmarks
// and later the `braid` tool.

/// Deterministic payload: byte `i` of every transfer is `PerfPattern.byte(i)`. Backed by a
/// table with a prime period so slices are cheap to send and to compare.
package enum PerfPattern {
    package static let period = 65521
    /// Byte `i` is `((i % 65521) * 2654435761) >> 7`, truncated to 8 bits (the interop peers
    /// compute the same formula).
    /// The longest slice one call hands out.
    package static let maxSlice = 256 * 1024
    static let table: [UInt8] = (0..<(period + maxSlice)).map { UInt8(truncatingIfNeeded: (($0 % period) &* 2_654_435_761) >> 7) }

    /// `count` (at most `maxSlice`) pattern bytes starting at transfer offset `offset`.
    package static func slice(at offset: Int, count: Int) -> ArraySlice<UInt8> {
        let start = offset % period
        return table[start..<start + count]
    }

    /// True if `bytes` are the pattern bytes from transfer offset `offset` on.
    package static func matches<Bytes: Collection>(_ bytes: Bytes, at offset: Int) -> Bool where Bytes.Element == UInt8 {
        if let result = bytes.withContiguousStorageIfAvailable({ matches($0, at: offset) }) { return result }
        return Array(bytes).withUnsafeBufferPointer { matches($0, at: offset) }
    }

    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        return table.withUnsafeBufferPointer { table in
            var position = 0
            while position < bytes.count {
                let count = min(maxSlice, bytes.count - position)
                if memcmp(table.baseAddress! + (offset + position) % period, base + position, count) != 0 { return false }
                position += count
            }
            return true
        }
    }
}

/// Server side of the perf exchange: a client stream carries an 8-byte big-endian size and
/// FIN; the server answers with that many pattern bytes and FIN.
package final class PerfServer {
    package init() {}

    /// One connection's requests being read and responses being sent, by stream.
    private struct Exchanges {
        var requests: [Int64: PerfRequest] = [:]
        var sending: [Int64: (total: Int, sent: Int)] = [:]
    }
    private var exchanges: [ObjectIdentifier: Exchanges] = [:]
    private let chunk = 64 * 1024

    /// Serves every connection of a server; call it for each event.
    package func handle(_ connection: QUICConnection, _ event: QUICEvent) {
        let key = ObjectIdentifier(connection)
        if case .terminated = event {
            exchanges[key] = nil
            return
        }
        var state = exchanges[key] ?? Exchanges()
        if case .streamReadable(let id) = event {
            while let read = try? connection.read(streamID: id) {
                // Only the 8-byte size matters; upload bytes after it are counted, not kept.
                var request = state.requests[id] ?? PerfRequest(verifyUpload: false)
                do {
                    try request.append(read.bytes, endOfStream: read.fin)
                    state.requests[id] = request.isComplete ? nil : request
                    if request.isComplete { state.sending[id] = (request.responseSize, 0) }
                } catch {
                    // Ended inside the header: nothing to answer.
                    state.requests[id] = nil
                }
                if read.bytes.isEmpty || read.fin { break }
            }
        }
        pump(connection, &state)
        exchanges[key] = state.requests.isEmpty && state.sending.isEmpty ? nil : state
    }

    private func pump(_ connection: QUICConnection, _ state: inout Exchanges) {
        for (id, progress) in state.sending {
            var sent = progress.sent
            while sent < progress.total {
                let room = connection.sendRoom(streamID: id)
                guard room > 0 else { break }
                let count = min(chunk, room, progress.total - sent)
                guard (try? connection.send(streamID: id, bytes: PerfPattern.slice(at: sent, count: count), fin: sent + count == progress.total)) != nil
                else { break }
                sent += count
            }
            if progress.total == 0 { try? connection.send(streamID: id, bytes: [UInt8](), fin: true) }
            state.sending[id] = sent == progress.total ? nil : (progress.total, sent)
        }
    }
}

/// Client side: asks for `size` bytes once connected and checks every byte as it arrives.
package final class PerfDownload {
    package let size: Int
    package private(set) var received = 0
    package private(set) var intact = true
    private var stream: Int64?
    /// Called once: with true when every byte arrived intact, false if the connection ended first.
    package var onFinished: (Bool) -> Void = { _ in }
    private var finished = false

    private func finish(_ success: Bool) {
        guard !finished else { return }
        finished = true
        onFinished(success)
    }

    package init(size: Int) { self.size = size }

    package func handle(_ connection: QUICConnection, _ event: QUICEvent) {
        switch event {
        case .handshakeCompleted:
            guard stream == nil, let id = try? connection.openStream(bidirectional: true) else { return }
            stream = id
            let request = withUnsafeBytes(of: UInt64(size).bigEndian) { Array($0) }
            _ = try? connection.send(streamID: id, bytes: request, fin: true)
        case .streamReadable(let id) where id == stream:
            while let read = try? connection.read(streamID: id) {
                if !read.bytes.isEmpty {
                    if !PerfPattern.matches(read.bytes, at: received) { intact = false }
                    received += read.bytes.count
                }
                if read.fin {
                    finish(intact && received == size)
                    return
                }
                if read.bytes.isEmpty { break }
            }
        case .connectionClosed:
            finish(false)
        default:
            break
        }
    }
}
