import BraidQUIC

/// Collects everything read from streams, per connection and stream.
final class StreamSink {
    var data: [ObjectIdentifier: [Int64: [UInt8]]] = [:]
    var finished: [ObjectIdentifier: Set<Int64>] = [:]
    var earlyBytes: [ObjectIdentifier: Int] = [:]
    var resets: [ObjectIdentifier: [Int64: UInt64]] = [:]
    var errors: [QUICError] = []

    /// Reads everything readable on `stream`; returns what was read and whether FIN came.
    @discardableResult
    func drain(_ connection: QUICConnection, stream: Int64) -> (bytes: [UInt8], fin: Bool) {
        let key = ObjectIdentifier(connection)
        var got: [UInt8] = []
        var fin = false
        while true {
            do {
                let read = try connection.read(streamID: stream)
                got += read.bytes
                if read.early { earlyBytes[key, default: 0] += read.bytes.count }
                if read.fin { fin = true; finished[key, default: []].insert(stream) }
                if read.bytes.isEmpty { break }
            } catch QUICError.streamReset(let id, let code) {
                resets[key, default: [:]][id] = code
                break
            } catch {
                errors.append(error as! QUICError)
                break
            }
        }
        data[key, default: [:]][stream, default: []] += got
        return (got, fin)
    }

    func bytes(_ connection: QUICConnection, _ stream: Int64) -> [UInt8] {
        data[ObjectIdentifier(connection)]?[stream] ?? []
    }

    func isFinished(_ connection: QUICConnection, _ stream: Int64) -> Bool {
        finished[ObjectIdentifier(connection)]?.contains(stream) ?? false
    }
}

/// Sends large payloads on streams while respecting the engine's send-buffer bound.
final class StreamSource {
    struct Pending { var connection: QUICConnection; var stream: Int64; var bytes: [UInt8]; var offset: Int; var fin: Bool }
    var pending: [Pending] = []
    let chunk: Int

    init(chunk: Int = 64 * 1024) { self.chunk = chunk }

    func enqueue(_ connection: QUICConnection, stream: Int64, bytes: [UInt8], fin: Bool = true) {
        pending.append(Pending(connection: connection, stream: stream, bytes: bytes, offset: 0, fin: fin))
        pump()
    }

    /// Queues as much as the engine accepts now.
    func pump() {
        for index in pending.indices {
            var item = pending[index]
            while item.offset < item.bytes.count, item.connection.canSend(streamID: item.stream) {
                let end = min(item.offset + chunk, item.bytes.count)
                try? item.connection.send(
                    streamID: item.stream, bytes: item.bytes[item.offset..<end], fin: item.fin && end == item.bytes.count)
                item.offset = end
            }
            if item.bytes.isEmpty && item.fin && item.offset == 0 {
                try? item.connection.send(streamID: item.stream, bytes: [UInt8](), fin: true)
                item.offset = -1
            }
            pending[index] = item
        }
        pending.removeAll { $0.offset == $0.bytes.count || $0.offset < 0 }
    }

    var isDone: Bool { pending.isEmpty }
}

/// The `echo` application on the server side: streams echoed with FIN mirrored, datagrams echoed.
final class EchoServer {
    let sink = StreamSink()
    let source = StreamSource()

    /// Handles one server event, then queues whatever echo bytes the streams accept now.
    func handle(_ connection: QUICConnection, _ event: QUICEvent) {
        guard connection.role == .server else { return }
        defer { source.pump() }
        switch event {
        case .streamReadable(let id):
            let (bytes, fin) = sink.drain(connection, stream: id)
            if !bytes.isEmpty || fin { source.enqueue(connection, stream: id, bytes: bytes, fin: fin) }
        case .datagramReceived(let bytes, _):
            _ = try? connection.sendDatagram(bytes)
        default:
            break
        }
    }
}
