import BraidIO
import BraidQUIC
import DequeModule
import Foundation

/// One stream's loop-side state: receives waiting for bytes and sends waiting for room.
///
/// Bytes are taken from the engine only while a receive is waiting, so a reader that stops
/// reading stops the peer at the stream's flow-control window. Sends are handed to the engine
/// in 64 KiB pieces while it accepts them (`canSend`), so a large send waits for
/// acknowledgements instead of growing memory.
final class StreamCore {
    let id: Int64
    let locallyInitiated: Bool
    private let core: ConnectionCore

    private struct Receiver {
        var minimum: Int
        var maximum: Int
        var exact: Bool
        var completion: Completion<(Data, Bool)>
    }
    private struct Sender {
        var bytes: StreamBytes
        var offset = 0
        var endOfStream: Bool
        var idempotent: Bool
        var completion: Completion<Void>
    }

    /// Bytes read from the engine for receives still to come (contiguous, so handing them
    /// over is one copy or none).
    private var buffered = Data()
    private var finReceived = false
    private var receiveError: NetworkError?
    private var receivers = Deque<Receiver>()
    private var senders = Deque<Sender>()
    private var sendError: NetworkError?
    private var endOfStreamQueued = false
    /// The engine has forgotten the stream (everything read, both sides done).
    private var engineClosed = false
    static let sendChunk = 64 * 1024

    init(id: Int64, core: ConnectionCore, locallyInitiated: Bool) {
        self.id = id
        self.core = core
        self.locallyInitiated = locallyInitiated
    }

    var loop: EventLoop { core.loop }
    var isBidirectional: Bool { id & 2 == 0 }
    var canReceive: Bool { isBidirectional || !locallyInitiated }
    var canSend: Bool { isBidirectional || locallyInitiated }

    // MARK: Receiving

    func receive(minimum: Int, maximum: Int, exact: Bool, context: LoopContext, completion: Completion<(Data, Bool)>) {
        guard canReceive else { return completion.fail(.streamNotReadable) }
        receivers.append(Receiver(minimum: minimum, maximum: maximum, exact: exact, completion: completion))
        deliver(context)
    }

    /// Satisfies waiting receives from the buffer and the engine, in order.
    func deliver(_ context: LoopContext) {
        var readFromEngine = false
        while let receiver = receivers.first {
            guard receiver.completion.isPending else {
                receivers.removeFirst()
                continue
            }
            while buffered.count < receiver.maximum, !finReceived, receiveError == nil, !engineClosed,
                let connection = core.connection
            {
                do {
                    let before = buffered.count
                    let read = try connection.read(streamID: id, maxBytes: receiver.maximum - buffered.count) { region in
                        buffered.append(region.assumingMemoryBound(to: UInt8.self))
                    }
                    let gotBytes = buffered.count > before
                    readFromEngine = readFromEngine || gotBytes
                    if read.fin { finReceived = true }
                    if !gotBytes && !read.fin { break }
                } catch {
                    receiveError = NetworkError(error, endpoint: core.endpointDescription)
                }
            }
            let available = buffered.count
            let ended = finReceived || receiveError != nil || engineClosed
            guard available >= receiver.minimum || ended else { break }
            receivers.removeFirst()
            if available == 0, let receiveError {
                receiver.completion.fail(receiveError)
            } else if receiver.exact && available < receiver.minimum {
                // The bytes stay buffered for a later, smaller receive.
                receiver.completion.fail(receiveError ?? .unexpectedEndOfStream(received: available, wanted: receiver.minimum))
            } else {
                let count = min(available, receiver.maximum)
                let content = takeBuffered(count)
                let endOfStream = finReceived && count == available
                if !receiver.completion.resume(.success((content, endOfStream))) {
                    // Cancelled meanwhile: the bytes go back for the next receive.
                    buffered = content + buffered
                }
            }
        }
        // Reading returned flow-control credit: let the engine announce it.
        if readFromEngine { core.flush(context) }
    }

    /// Removes and returns the first `count` buffered bytes, as a Data indexed from 0.
    private func takeBuffered(_ count: Int) -> Data {
        if count == buffered.count && buffered.startIndex == 0 {
            defer { buffered = Data() }
            return buffered
        }
        let content = Data(buffered.prefix(count))
        buffered = Data(buffered.dropFirst(count))
        return content
    }

    // MARK: Sending

    func send(_ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool, context: LoopContext, completion: Completion<Void>) {
        if let sendError { return completion.fail(sendError) }
        guard canSend, !endOfStreamQueued else { return completion.fail(.streamNotWritable) }
        endOfStreamQueued = endOfStream
        senders.append(Sender(bytes: bytes, endOfStream: endOfStream, idempotent: idempotent, completion: completion))
        pump(context)
    }

    /// Hands queued sends to the engine while it has room; each send completes once all of its
    /// bytes are with the engine.
    func pump(_ context: LoopContext) {
        guard let connection = core.connection else { return }
        var wrote = false
        while var sender = senders.first {
            guard sender.completion.isPending else {
                senders.removeFirst()
                continue
            }
            if let sendError {
                senders.removeFirst()
                sender.completion.fail(sendError)
                continue
            }
            // A client's data may go out in 0-RTT (replayable) only when the caller said it is
            // idempotent. A server may answer before the handshake completes (0.5-RTT data
            // travels under 1-RTT keys and cannot be replayed), which is what makes a 0-RTT
            // request's answer arrive one round trip after it was sent.
            if !core.isReady && !sender.idempotent && connection.role == .client { break }
            do {
                while sender.offset < sender.bytes.count, connection.canSend(streamID: id) {
                    let end = min(sender.offset + Self.sendChunk, sender.bytes.count)
                    try connection.send(
                        streamID: id, bytes: sender.bytes, range: sender.offset..<end, fin: sender.endOfStream && end == sender.bytes.count)
                    sender.offset = end
                    wrote = true
                }
                if sender.bytes.count == 0 && sender.endOfStream {
                    try connection.send(streamID: id, bytes: EmptyCollection<UInt8>(), fin: true)
                    wrote = true
                }
            } catch {
                sendError = NetworkError(error, endpoint: core.endpointDescription)
                continue
            }
            guard sender.offset == sender.bytes.count else {
                senders[senders.startIndex] = sender
                break
            }
            senders.removeFirst()
            sender.completion.resume(.success(()))
        }
        if wrote { core.flush(context) }
    }

    // MARK: Ending

    func peerStopped(code: UInt64?) {
        sendError = .streamStopped(code: code)
        while let sender = senders.popFirst() { sender.completion.fail(.streamStopped(code: code)) }
    }

    func engineClosed(_ context: LoopContext) {
        engineClosed = true
        deliver(context)
    }

    /// The connection ended: every waiting call fails with its reason.
    func connectionEnded(_ error: NetworkError) {
        receiveError = receiveError ?? error
        sendError = sendError ?? error
        engineClosed = true
        while let receiver = receivers.popFirst() {
            if buffered.isEmpty || receiver.exact && buffered.count < receiver.minimum {
                receiver.completion.fail(error)
            } else {
                let content = takeBuffered(min(buffered.count, receiver.maximum))
                if !receiver.completion.resume(.success((content, false))) { buffered = content + buffered }
            }
        }
        while let sender = senders.popFirst() { sender.completion.fail(error) }
    }

    func reset(code: UInt64, context: LoopContext) throws {
        try core.connection?.resetStream(streamID: id, applicationErrorCode: code)
        sendError = .invalidState("the stream was reset locally")
        while let sender = senders.popFirst() { sender.completion.fail(.cancelled) }
        core.flush(context)
    }

    func stopSending(code: UInt64, context: LoopContext) throws {
        try core.connection?.stopSending(streamID: id, applicationErrorCode: code)
        receiveError = .invalidState("receiving was stopped locally")
        deliver(context)
        core.flush(context)
    }

    /// A stream opened for a call that was cancelled before it got the stream.
    func abandon(_ context: LoopContext) {
        try? core.connection?.resetStream(streamID: id, applicationErrorCode: 0)
        core.flush(context)
    }
}

extension Completion {
    func fail(_ error: NetworkError) { resume(.failure(error)) }
}
