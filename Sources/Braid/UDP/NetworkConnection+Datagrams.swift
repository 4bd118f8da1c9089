import BraidIO
import Foundation
import Synchronization

/// The datagram side of a connection whose core has a datagram channel: `UDP()`, and `Coder`
/// over UDP (one value per datagram). Both send and receive through this one piece of code.
extension NetworkConnection {
    /// Sends `datagram` as one UDP datagram (see `send(_:)` of `NetworkConnection<UDP>`):
    /// returns once it is queued; `datagramTooLarge` beyond what UDP carries, `unsupported`
    /// when empty. A datagram marked with `ecn` goes through the loop, which keeps the mark
    /// with it (the outbox's fast path carries unmarked datagrams only).
    func sendDatagram(_ datagram: Data, ecn: ECN = .notECT) async throws {
        guard !datagram.isEmpty else { throw NetworkError.unsupported("empty UDP datagrams") }
        if Task.isCancelled { throw NetworkError.cancelled }
        // A send that finds room makes no suspendable call (an async closure per datagram
        // allocated a task frame).
        var waiting = ecn == .notECT ? try offerDatagram(datagram) : .needsLoop
        // Queued: return before the async `mapping` call below, whose frame and closure cost
        // a task allocation even when its loop would not run.
        if waiting == nil { return }
        try await NetworkError.mapping {
            while let wait = waiting {
                switch wait {
                case .full:
                    // Inside `batch` no drain may be coming yet: make room.
                    postDatagramDrain()
                    try await datagramPart.outbox.waitForRoom()
                    waiting = try offerDatagram(datagram)
                default:
                    // Before ready, or larger than the outbox allows: the channel decides.
                    start()
                    let core = core
                    try await Completion<Void>.wait(on: loop) { context, completion in
                        core.value.datagram.sendDatagram(datagram, ecn: ecn, context: context, completion: completion)
                    }
                    return
                }
            }
        }
    }

    /// Queues an unmarked `datagram` if that needs no wait and no loop (the outbox has room and
    /// the connection is ready): true once queued. False leaves every other case, and its
    /// error, to `sendDatagram`, which offers it again.
    func queuedDatagramAtOnce(_ datagram: Data) throws -> Bool {
        guard !datagram.isEmpty, !Task.isCancelled else { return false }
        return try offerDatagram(datagram) == nil
    }

    /// Offers `datagram` to the outbox: nil once it is queued (with a drain posted when one is
    /// needed and no `batch` is open, whose end posts it); `.full` or `.needsLoop` when the
    /// send must wait. Throws the connection's error.
    func offerDatagram(_ datagram: Data) throws -> DatagramOutbox.Offer? {
        let part = try datagramPart
        switch part.outbox.offer(datagram) {
        case .queued:
            return nil
        case .queuedDrainNeeded:
            if part.batchDepth.load(ordering: .acquiring) == 0 { postDatagramDrain() }
            return nil
        case .failed(let error):
            throw NetworkError(error)
        case let wait:
            return wait
        }
    }

    /// The connection's datagram queues. Every connection whose core has a datagram channel
    /// has them (its core was made for the stack).
    var datagramPart: DatagramShared {
        get throws {
            guard let part = shared.datagram else { throw NetworkError.internalError("a \(ApplicationProtocol.self) connection without datagram queues") }
            return part
        }
    }

    /// Asks the loop for a pass that writes every queued datagram.
    func postDatagramDrain() {
        let core = core
        loop.execute { context in core.value.datagram.sendQueued(context) }
    }

    /// The next datagram, whole, with its metadata; throws the connection's error once it has
    /// ended and every datagram was read (`cancelled` after `cancel()`).
    func receiveDatagram() async throws -> (content: Data, metadata: UDP.Metadata) {
        guard let datagram = try await nextDatagram() else {
            if case .failed(let error) = state { throw error }
            throw NetworkError.cancelled
        }
        return datagram
    }

    private func nextDatagram() async throws -> (content: Data, metadata: UDP.Metadata)? {
        guard let part = shared.datagram else { throw NetworkError.internalError("a UDP connection without a datagram inbox") }
        start()
        guard let datagram = try await NetworkError.mapping({ try await part.inbox.takeFirst() }) else { return nil }
        let unix = unixEndpoint
        return (
            datagram.content,
            part.endpoints.withLock {
                $0.unixEndpoint = unix
                return $0.metadata(for: datagram.metadata)
            }
        )
    }

    /// The endpoint of a Unix-domain connection, whose datagrams it names (nil over IP).
    private var unixEndpoint: NWEndpoint? {
        if case .unix = endpoint { endpoint } else { nil }
    }

    /// What each iterator of `messages` reads from, over UDP: every datagram queued taken at
    /// once (one lock round and at most one wake-up per batch the socket delivered), then
    /// handed out from the iterator by `poll` without suspending; those left when it is
    /// dropped go back to the inbox. `receive` is nil once the connection was cancelled and
    /// every datagram read, the connection's error if it failed.
    func datagramSource() -> NetworkMessages<(content: Data, metadata: UDP.Metadata)>.Source {
        guard let inbox = shared.datagram?.inbox else {
            return .init(receive: { throw NetworkError.internalError("a UDP connection without a datagram inbox") })
        }
        let batch = MessageBatch(inbox: inbox)
        // One memo for both closures: the iterator calls them in turn, never at once.
        let endpoints = DatagramEndpointMemo()
        endpoints.unixEndpoint = unixEndpoint
        return .init(
            // A `guard` rather than `Optional.map`: the closure `map` takes ran generic, with
            // value-witness copies and destroys of each datagram.
            poll: {
                guard let datagram = batch.takeQueued() else { return nil }
                return (datagram.content, endpoints.metadata(for: datagram.metadata))
            },
            receive: { [self] in
                start()
                if let datagram = try await NetworkError.mapping({ try await batch.take() }) {
                    return (datagram.content, endpoints.metadata(for: datagram.metadata))
                }
                if case .failed(let error) = state { throw error }
                return nil
            })
    }

    /// Runs `body` with the drain pass held back, so the sends inside leave together once it
    /// returns (`batch { }` of UDP and DTLS). A connection always has its datagram part;
    /// without one, the block just runs.
    func holdingDatagramDrain<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        let part = shared.datagram
        part?.batchDepth.add(1, ordering: .acquiringAndReleasing)
        defer {
            if part?.batchDepth.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { postDatagramDrain() }
        }
        return try await body()
    }
}
