import BraidCore
import DequeModule
import Foundation

/// The receive half of a byte stream, shared by the application's tasks and the stream's loop.
///
/// Every byte the engine has reaches the inbox as it arrives (a socket read, a TLS record's
/// decryption or a QUIC stream's bytes from the engine's callback land in the inbox's memory,
/// see `InboxWriter`; an HTTP/3 body is copied in, `fill(from:)`), but the flow-control credit
/// for those bytes goes back to the peer only as the application consumes them, so the peer
/// never has more than its window unread here and in the engine together: a reader that stops
/// reading stops the peer. A `receive` that finds enough bytes takes them
/// under the lock and returns without a trip to the loop; only one that must wait suspends,
/// and the loop resumes it when bytes arrive. The consumed credit is handed back in coalesced
/// loop passes (`claimCreditPass`), never by the receive waiting for one.
///
/// Unread bytes are runs of chunks (`InboxWriter.Segment`). A receive takes from the first run
/// alone when that run holds what it needs at least: a large part of a chunk (16 KiB or more,
/// and a quarter of the chunk or more, so a kept `Data` never holds more than four times its
/// size) is handed over as a `Data` over the chunk's memory, without a copy; a smaller part, or
/// one gathered across runs, is copied.
///
/// Stack-neutral: QUIC streams, HTTP/3 bodies, and TLS and TCP connections receive this way.
package final class StreamInbox: Sendable {
    /// What one receive asks for: between `minimum` and `maximum` bytes; with `exact`, fewer
    /// than `minimum` only as an error.
    package struct Request: Sendable {
        package var minimum: Int
        package var maximum: Int
        package var exact: Bool

        package init(minimum: Int, maximum: Int, exact: Bool) {
            self.minimum = minimum
            self.maximum = maximum
            self.exact = exact
        }
    }

    /// What one receive gets: the bytes, and whether they end the stream.
    package struct Delivery: Sendable {
        package var content: Data
        package var endOfStream: Bool
    }

    /// How the stream's byte sequence ended.
    package enum End {
        /// The peer finished it (FIN): no byte follows those queued.
        case finished
        /// It failed (reset, stopped, or the connection ended): after the queued bytes, receives
        /// throw this.
        case failed(any Error)
    }

    package init() {}

    private struct Waiter {
        var request: Request
        var completion: Completion<Delivery>
    }

    private struct State {
        /// Unread bytes, in order.
        var segments = Deque<InboxWriter.Segment>()
        var available = 0
        /// Bytes the application has taken so far.
        var taken: UInt64 = 0
        /// Where `fill(from:)` copies bytes.
        var writer = InboxWriter(largestChunk: StreamInbox.largestOwnChunk)
        var finished = false
        var error: (any Error)?
        var waiters = Deque<Waiter>()
        /// Bytes consumed (or promised to a waiting receive) whose credit has not gone back to
        /// the engine yet.
        var unreturnedCredit = 0
        /// Unread bytes whose credit went back already: promised to the receive waiting first.
        var creditedAhead = 0
        /// A loop pass that returns the credit is posted and has not run yet.
        var creditPassPosted = false

        var isEnded: Bool { finished || error != nil }

        /// The stream ends after the bytes queued now.
        mutating func end(_ end: End) {
            switch end {
            case .finished: finished = true
            case .failed(let failure): error = failure
            }
        }

        /// No live receive is waiting (cancelled ones at the front are dropped, so they cannot
        /// hold back later receives).
        mutating func noneWaiting() -> Bool {
            while let first = waiters.first, !first.completion.isPending { waiters.removeFirst() }
            return waiters.isEmpty
        }

        func canDecide(_ request: Request) -> Bool { available >= request.minimum || isEnded }

        /// Decides a request that `canDecide`, taking the bytes it gets.
        mutating func decide(_ request: Request) -> Result<Delivery, any Error> {
            let count = available
            if count == 0, let error { return .failure(error) }
            if request.exact && count < request.minimum {
                // The bytes stay queued for a later, smaller receive.
                return .failure(error ?? StreamBridgeError.unexpectedEndOfStream(received: count, wanted: request.minimum))
            }
            // From the first run alone when it holds the minimum and goes out without a copy;
            // a copy gathers as much as the request allows.
            var taken = min(count, request.maximum)
            if let first = segments.first, first.count >= request.minimum, first.count < taken,
                Self.handsOver(first.count, of: first.chunk)
            {
                taken = first.count
            }
            let content = take(taken)
            return .success(Delivery(content: content, endOfStream: finished && available == 0))
        }

        /// The receive waiting first gets the credit of the bytes it will take (up to its
        /// maximum) back to the peer now: it may need more than the window holds, and the
        /// peer can send the rest only once that credit is back.
        mutating func promiseToFirstWaiter() {
            guard let first = waiters.first else { return }
            let promised = min(available, first.request.maximum)
            guard promised > creditedAhead else { return }
            unreturnedCredit += promised - creditedAhead
            creditedAhead = promised
        }

        /// Removes and returns the first `count` unread bytes: a large part of the first run
        /// without a copy, anything else copied.
        mutating func take(_ count: Int) -> Data {
            account(count)
            guard count > 0 else { return Data() }
            var first = segments[segments.startIndex]
            if first.count >= count {
                let content = Self.content(of: first.chunk, from: first.start, count: count)
                first.start += count
                if first.count == 0 { segments.removeFirst() } else { segments[segments.startIndex] = first }
                return content
            }
            var content = Data(capacity: count)
            var left = count
            while left > 0 {
                var segment = segments[segments.startIndex]
                let piece = min(left, segment.count)
                content.append(UnsafeRawBufferPointer(rebasing: segment.chunk.base[segment.start..<segment.start + piece]).assumingMemoryBound(to: UInt8.self))
                segment.start += piece
                left -= piece
                if segment.count == 0 { segments.removeFirst() } else { segments[segments.startIndex] = segment }
            }
            return content
        }

        /// Counts `count` unread bytes as consumed (their credit is owed to the peer).
        private mutating func account(_ count: Int) {
            let credited = min(count, creditedAhead)
            creditedAhead -= credited
            unreturnedCredit += count - credited
            available -= count
            taken &+= UInt64(count)
            // Caught up: the inbox's own writer lets its chunk go, so an HTTP/3 body whose bytes
            // are all read holds none. A TLS or TCP connection's writer keeps its one chunk:
            // letting it go at each catch-up cost a bulk TCP receiver 5% to 10% more CPU; so does
            // a QUIC stream's sink, which writes it again once it is free
            // (`InboxWriter.write(_:startingBatch:)`).
            if available == 0 { writer.releaseChunk() }
        }

        /// Drops the first `count` unread bytes (counted as consumed), without a copy.
        mutating func skip(_ count: Int) {
            account(count)
            var left = count
            while left > 0 {
                var segment = segments[segments.startIndex]
                let piece = min(left, segment.count)
                segment.start += piece
                left -= piece
                if segment.count == 0 { segments.removeFirst() } else { segments[segments.startIndex] = segment }
            }
        }

        /// The first `size` (at most 8) unread bytes as a big-endian integer, without taking
        /// them (the caller checked they are here).
        func peek(_ size: Int) -> UInt64 {
            var value: UInt64 = 0, needed = size
            var index = segments.startIndex
            while needed > 0 {
                let segment = segments[index]
                let run = min(needed, segment.count)
                for position in segment.start..<segment.start + run { value = value << 8 | UInt64(segment.chunk.base[position]) }
                needed -= run
                index = segments.index(after: index)
            }
            return value
        }

        /// `count` bytes of `chunk` from `start` as a `Data` indexed from 0: over the chunk itself
        /// when they are a large part of it (the `Data` keeps the chunk alive; the inbox's producer
        /// never writes those bytes again), else a copy.
        private static func content(of chunk: StreamBytes, from start: Int, count: Int) -> Data {
            let region = chunk.base.baseAddress! + start
            guard handsOver(count, of: chunk) else { return Data(bytes: region, count: count) }
            return Data(bytesNoCopy: region, count: count, deallocator: .custom { _, _ in withExtendedLifetime(chunk) {} })
        }

        /// Whether `count` bytes of `chunk` go out without a copy.
        static func handsOver(_ count: Int, of chunk: StreamBytes) -> Bool {
            count >= StreamInbox.zeroCopyMinimum && count * 4 >= chunk.count
        }
    }

    /// A receive of at least this many bytes from one run (and a quarter of its chunk) gets
    /// them without a copy.
    package static let zeroCopyMinimum = 16 * 1024
    /// The largest chunk bytes are copied into: by `fill(from:)`, and by a QUIC stream's sink.
    package static let largestOwnChunk = 64 * 1024
    /// Consumed credit goes back in a loop pass once this much has gathered, or whenever the
    /// reader has caught up (nothing left unread), whichever comes first.
    package static let creditBatch = 64 * 1024

    private let state = Locked(State())

    /// Unread bytes now.
    package var available: Int { state.withLock { $0.available } }

    /// Bytes the application has read so far (a listener's buffer limit measures drain by it).
    package var bytesRead: UInt64 { state.withLock { $0.taken } }

    /// Receives waiting (cancelled ones included until they are reached).
    package var waitingReceives: Int { state.withLock { $0.waiters.count } }

    /// Whether the stream has ended (finished or failed).
    package var hasEnded: Bool { state.withLock { $0.isEnded } }

    // MARK: Application side (any thread)

    /// Bytes as `request` asks, at once when they are queued (or the stream has ended), else
    /// once the loop delivers them. Throws if the task is cancelled
    /// while it waits (`CancellationError`). A receive that waits calls `returnCredit` first when the bytes it
    /// waits on need credit to go back to the peer (the caller posts a loop pass that calls
    /// `takeCredit`).
    package func receive(_ request: Request, returnCredit: () -> Void) async throws -> Delivery {
        let immediate = state.withLock { state -> Result<Delivery, any Error>? in
            guard state.noneWaiting(), state.canDecide(request) else { return nil }
            return state.decide(request)
        }
        if let immediate { return try immediate.get() }
        return try await Completion<Delivery>.wait { completion in
            let (decided, creditPassNeeded) = state.withLock {
                state -> ((Completion<Delivery>.Claim, Result<Delivery, any Error>)?, Bool) in
                // Bytes (or the end) may have arrived since the first look.
                if state.noneWaiting(), state.canDecide(request), let claim = completion.claim() {
                    return ((claim, state.decide(request)), false)
                }
                state.waiters.append(Waiter(request: request, completion: completion))
                state.promiseToFirstWaiter()
                guard !state.creditPassPosted, state.unreturnedCredit > 0 else { return (nil, false) }
                state.creditPassPosted = true
                return (nil, true)
            }
            if let (claim, result) = decided { claim.resume(result) }
            if creditPassNeeded { returnCredit() }
        }
    }

    /// What `takeMessage` found.
    package enum MessageTake {
        /// The message's header (as `takeMessage` read it) and its value, both consumed.
        case message(header: UInt64, value: Data)
        /// The whole message is not here yet, or a receive waits (it comes first): nothing
        /// was taken.
        case incomplete
        /// `length` refused the header: nothing was taken.
        case refused
    }

    /// Takes one length-prefixed message in one lock round, if the whole of it is here and
    /// no receive waits: a header of `headerSize` bytes (at most 8, read as a big-endian
    /// integer) whose value's length `length` says (nil refuses it), then that value. The
    /// header is never copied and the value is copied once at most (into the `Data`
    /// returned, as `receive` takes bytes), so a framer decodes straight from the stream's
    /// memory. Its credit goes back as a receive's does (`claimCreditPass`).
    package func takeMessage(headerSize: Int, length: (UInt64) -> Int?) -> MessageTake {
        precondition((1...8).contains(headerSize), "a header of 1 to 8 bytes")
        return state.withLock { state in
            guard state.available >= headerSize, state.noneWaiting() else { return .incomplete }
            let header = state.peek(headerSize)
            guard let count = length(header) else { return .refused }
            guard state.available - headerSize >= count else { return .incomplete }
            state.skip(headerSize)
            return .message(header: header, value: state.take(count))
        }
    }

    /// True when consumed credit should go back to the engine now and no pass for it is
    /// posted yet: the caller posts one (which calls `takeCredit`).
    package func claimCreditPass() -> Bool {
        state.withLock { state in
            guard !state.creditPassPosted, state.unreturnedCredit > 0,
                state.unreturnedCredit >= Self.creditBatch || state.available == 0
            else { return false }
            state.creditPassPosted = true
            return true
        }
    }

    // MARK: Loop side

    /// Appends what `source` reads (it calls its sink with each region, valid only during the
    /// call, and returns how the stream ended, if it did), then hands bytes to waiting
    /// receives in order. Does nothing once the stream has ended.
    package func fill(from source: (_ sink: (UnsafeRawBufferPointer) -> Void) -> End?) {
        let claims = state.withLock { state -> [(Completion<Delivery>.Claim, Result<Delivery, any Error>)] in
            guard !state.isEnded else { return [] }
            let end = source { region in state.writer.write(region) }
            state.available += state.writer.publish(into: &state.segments)
            if let end { state.end(end) }
            return Self.satisfyWaiters(&state)
        }
        for (claim, result) in claims { claim.resume(result) }
    }

    /// Takes over what `writer` wrote since its last publication (without a copy) and, with
    /// `end`, ends the stream after it; then hands bytes to waiting receives in order. For a
    /// producer that writes outside the lock (a socket read, TLS decrypting a batch of
    /// records), so a receive never waits on that work. Does nothing once the stream has ended.
    package func fill(publishing writer: inout InboxWriter, end: End? = nil) {
        guard writer.hasUnpublished || end != nil else { return }
        let claims = state.withLock { state -> [(Completion<Delivery>.Claim, Result<Delivery, any Error>)] in
            guard !state.isEnded else {
                // Nobody reads any more (a closing connection reads until the peer's FIN).
                writer.discardUnpublished()
                return []
            }
            state.available += writer.publish(into: &state.segments)
            if let end { state.end(end) }
            return Self.satisfyWaiters(&state)
        }
        for (claim, result) in claims { claim.resume(result) }
    }

    /// Takes over what `writer` wrote since its last publication (without a copy), ending the
    /// stream after it when `end` says so; then hands bytes to waiting receives in order, and
    /// returns the consumed credit not yet returned (as `takeCredit` does, in the same lock
    /// round). `end` runs under the inbox's lock, and only while the stream has not ended: for
    /// a producer that learns the end from an engine it must not ask for an ended stream (a
    /// QUIC stream's owner, whose engine read re-arms its readable signal). Once the stream has
    /// ended the writer keeps what it has, for its owner to drop and credit.
    package func fill(publishing writer: inout InboxWriter, endingWith end: () -> End?) -> Int {
        let (claims, credit) = state.withLock { state -> ([(Completion<Delivery>.Claim, Result<Delivery, any Error>)], Int) in
            var claims: [(Completion<Delivery>.Claim, Result<Delivery, any Error>)] = []
            if !state.isEnded {
                let ending = end()
                state.available += writer.publish(into: &state.segments)
                if let ending { state.end(ending) }
                claims = Self.satisfyWaiters(&state)
            }
            defer {
                state.unreturnedCredit = 0
                state.creditPassPosted = false
            }
            return (claims, state.unreturnedCredit)
        }
        for (claim, result) in claims { claim.resume(result) }
        return credit
    }

    /// The stream failed: queued bytes stay readable, then receives throw `error`. A stream
    /// that already ended keeps its first end.
    package func fail(_ error: any Error) {
        let claims = state.withLock { state -> [(Completion<Delivery>.Claim, Result<Delivery, any Error>)] in
            // A finished stream stays finished: its reader sees the end of the stream, not a
            // failure that came after it (a peer-opened unidirectional stream is retired, and
            // its inbox failed, once its FIN is read).
            if !state.isEnded { state.error = error }
            return Self.satisfyWaiters(&state)
        }
        for (claim, result) in claims { claim.resume(result) }
    }

    /// Takes the consumed credit not yet returned, for the engine.
    package func takeCredit() -> Int {
        state.withLock { state in
            defer {
                state.unreturnedCredit = 0
                state.creditPassPosted = false
            }
            return state.unreturnedCredit
        }
    }

    /// Decides waiting receives in order while they can be; a cancelled one is skipped with
    /// its bytes untouched.
    private static func satisfyWaiters(_ state: inout State) -> [(Completion<Delivery>.Claim, Result<Delivery, any Error>)] {
        var decided: [(Completion<Delivery>.Claim, Result<Delivery, any Error>)] = []
        while !state.noneWaiting(), let waiter = state.waiters.first, state.canDecide(waiter.request) {
            state.waiters.removeFirst()
            guard let claim = waiter.completion.claim() else { continue }
            decided.append((claim, state.decide(waiter.request)))
        }
        state.promiseToFirstWaiter()
        return decided
    }
}
