import BraidCore
import BraidIO
import Foundation

/// The application's end of one byte stream: what `QUIC.Stream` and a TLS or TCP connection
/// send into and receive from, without a trip to the loop when they can (see `StreamInbox`
/// and `StreamOutbox`). The two closures post the loop passes the stream's owner runs: one
/// hands queued sends to the engine or socket, one gives back the room consumed bytes freed.
struct ByteStreamEnd: Sendable {
    let inbox: StreamInbox
    let outbox: StreamOutbox
    /// Posts a pass that hands the outbox's queued bytes on.
    let postPump: @Sendable () -> Void
    /// Posts a pass that returns the credit (room) of bytes the application consumed.
    let postCreditPass: @Sendable () -> Void
    /// Large sends keep the caller's bytes instead of a copy (plain TCP: see `queueAtOnce(copying:)`).
    var borrowsLargeSends = false

    /// Queues `bytes`: at once when the stream has room, else waiting until the owner has
    /// taken them (see `StreamOutbox`). `queued` runs once the bytes are in the outbox (or
    /// refused), before the call waits: a connection that starts there finds them queued, so
    /// idempotent bytes sent first can go as early data. A QUIC stream's send first waits
    /// for room in its connection's budget (`SharedSendBudget`). Throws `NetworkError`.
    func send(_ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool, queued: () -> Void = {}) async throws {
        if try queueAtOnce(bytes, endOfStream: endOfStream, idempotent: idempotent, queued: queued) { return }
        try await sendWaiting(bytes, endOfStream: endOfStream, idempotent: idempotent, queued: queued)
    }

    /// `queueAtOnce` for a small send (at most `StreamOutbox.largestSharedSend` bytes) that
    /// `write` copies straight into the block earlier small sends fill: no `StreamBytes` of its
    /// own. False when it must wait, or the stream has a budget: the caller then makes its
    /// bytes and calls `sendWaiting`.
    func queueAtOnce(count: Int, endOfStream: Bool, queued: () -> Void, writing write: (UnsafeMutableRawBufferPointer) -> Void) throws -> Bool {
        guard outbox.budget == nil, count <= StreamOutbox.largestSharedSend else { return false }
        return try settle(outbox.offer(count: count, endOfStream: endOfStream, writing: write), queued: queued)
    }

    /// Queues a send of `content` if the stream has room now (nil: queued); otherwise what
    /// `sendWaiting` queues. A small send is copied into a shared block. On plain TCP
    /// (`borrowsLargeSends`) one of at least `smallestBorrowedSend` bytes in a `Data`, array,
    /// array slice or contiguous array is not copied at all: the outbox keeps the immutable
    /// value until the socket has taken its bytes. Anything else gets its own copy. (Over TLS,
    /// borrowing saved the client its copy but measured 0.91x and 0.95x bulk goodput, the
    /// server's CPU up 1.07x and 1.11x, on this 2-core machine, so TLS copies.)
    func queueAtOnce(copying content: some Collection<UInt8> & Sendable, endOfStream: Bool, queued: () -> Void) throws -> StreamOutbox.Storage? {
        let count = content.count
        if count <= StreamOutbox.largestSharedSend,
            try queueAtOnce(count: count, endOfStream: endOfStream, queued: queued, writing: { $0.copyCollection(content) }) {
            return nil
        }
        let storage: StreamOutbox.Storage
        if borrowsLargeSends, outbox.budget == nil, count >= Self.smallestBorrowedSend, Self.isBorrowable(content) {
            storage = .borrowed(content)
        } else {
            storage = .owned(StreamBytes(copying: content))
        }
        guard outbox.budget == nil else { return storage }
        return try settle(outbox.offer(storage, endOfStream: endOfStream, idempotent: false), queued: queued) ? nil : storage
    }

    /// Whether `content` is one of the standard byte containers, whose bytes stay contiguous
    /// and unchanged while the value lives (a value of another `Collection` type, whose
    /// contiguity or count could vary between calls, is copied).
    private static func isBorrowable(_ content: some Collection<UInt8>) -> Bool {
        guard content is Data || content is [UInt8] || content is ArraySlice<UInt8> || content is ContiguousArray<UInt8> else {
            return false
        }
        return content.withContiguousStorageIfAvailable { _ in true } == true
    }

    /// Sends of at least this many bytes are borrowed rather than copied on plain TCP: below
    /// it the copy costs less than the gathered writes of many small borrowed pieces.
    static let smallestBorrowedSend = 16 * 1024

    /// `send` after `queueAtOnce` said no: charges the budget and queues, waiting for room.
    /// A public send calls `queueAtOnce` itself and then this, so a send that finds room makes
    /// no suspendable call at all.
    func sendWaiting(_ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool, queued: () -> Void = {}) async throws {
        try await sendWaiting(.owned(bytes), endOfStream: endOfStream, idempotent: idempotent, queued: queued)
    }

    /// `sendWaiting` for any storage (`.borrowed` only on a stream without a budget).
    func sendWaiting(_ storage: StreamOutbox.Storage, endOfStream: Bool, idempotent: Bool, queued: () -> Void = {}) async throws {
        try await admit(storage.count)
        try await queue(storage, endOfStream: endOfStream, idempotent: idempotent, queued: queued)
    }

    /// Queues `bytes` without suspending if the stream has room now and no send budget to
    /// charge (TLS, TCP): true when queued; false when the caller must take the waiting path.
    /// A burst of small sends then costs a lock round each rather than a chain of
    /// suspendable calls. Throws `NetworkError` for a stream that takes no more.
    func queueAtOnce(_ bytes: StreamBytes, endOfStream: Bool, idempotent: Bool, queued: () -> Void) throws -> Bool {
        guard outbox.budget == nil else { return false }
        return try settle(outbox.offer(bytes, endOfStream: endOfStream, idempotent: idempotent), queued: queued)
    }

    /// What a caller does after an offer: true once queued, false to wait, or the error.
    private func settle(_ offer: StreamOutbox.Offer, queued: () -> Void) throws -> Bool {
        switch offer {
        case .accepted(let drainNeeded):
            queued()
            if drainNeeded { postPump() }
            return true
        case .failed(let error):
            queued()
            throw NetworkError(error)
        case .mustWait:
            return false
        }
    }

    /// Like `send`, but copies `content` only once the connection's budget admits it, so a
    /// sender waiting for room holds no copy of its own.
    func send<Content: Collection>(copying content: Content, endOfStream: Bool, idempotent: Bool) async throws
    where Content.Element == UInt8 {
        try await admit(content.count)
        try await queue(.owned(StreamBytes(copying: content)), endOfStream: endOfStream, idempotent: idempotent, queued: {})
    }

    /// Charges `count` bytes to the connection's send budget, waiting (in turn) while it is
    /// used up; a waiting sender has the loop look at the engine again, so room that comes
    /// back is seen. No budget (TLS, TCP): returns at once.
    private func admit(_ count: Int) async throws {
        guard let budget = outbox.budget else { return }
        let outbox = outbox, postPump = postPump
        try await NetworkError.mapping { try await budget.admit(count, for: outbox) { postPump() } }
    }

    private func queue(_ bytes: StreamOutbox.Storage, endOfStream: Bool, idempotent: Bool, queued: () -> Void) async throws {
        try await NetworkError.mapping {
            // With room, the bytes are queued here and the call returns; the first send of a
            // burst posts the one loop pass that hands them all on.
            switch outbox.offer(bytes, endOfStream: endOfStream, idempotent: idempotent) {
            case .accepted(let drainNeeded):
                queued()
                if drainNeeded { postPump() }
                return
            case .failed(let error):
                queued()
                throw error
            case .mustWait:
                break
            }
            try await Completion<Void>.wait { completion in
                switch outbox.enqueue(bytes, endOfStream: endOfStream, idempotent: idempotent, completion: completion) {
                case .success(let drainNeeded):
                    queued()
                    if drainNeeded { postPump() }
                case .failure(let error):
                    queued()
                    completion.resume(.failure(error))
                }
            }
        }
    }

    /// Between `minimum` and `maximum` bytes (with `exact`, fewer only as an error), and
    /// whether they end the stream. Throws `NetworkError`.
    func receive(minimum: Int, maximum: Int, exact: Bool) async throws -> StreamInbox.Delivery {
        // Bytes already here are taken without a trip to the loop; the credit they free goes
        // back in a coalesced loop pass.
        let delivery = try await NetworkError.mapping {
            try await inbox.receive(StreamInbox.Request(minimum: minimum, maximum: maximum, exact: exact)) {
                postCreditPass()
            }
        }
        if inbox.claimCreditPass() { postCreditPass() }
        return delivery
    }
}

extension ByteStreamEnd {
    /// Apple's receive shapes, shared by `QUIC.Stream` and TLS/TCP connections.
    func receive(exactly count: Int) async throws -> (content: Data, metadata: StreamMetadata) {
        try await receive(minimum: count, maximum: count, exact: true).withMetadata
    }

    func receive(atLeast minimum: Int, atMost maximum: Int) async throws -> (content: Data, metadata: StreamMetadata) {
        try await receive(minimum: minimum, maximum: max(minimum, maximum), exact: false).withMetadata
    }

    func receive<Integer: FixedWidthInteger>(as type: Integer.Type) async throws -> (content: Integer, metadata: StreamMetadata) {
        let (content, metadata) = try await receive(exactly: MemoryLayout<Integer>.size)
        return (integer(from: content, as: Integer.self), metadata)
    }

    /// An integer's bytes in network byte order.
    static func bytes<Integer: FixedWidthInteger>(of value: Integer) -> StreamBytes {
        withUnsafeBytes(of: value.bigEndian) { StreamBytes(copying: $0) }
    }

    /// The integer whose network-byte-order bytes these are.
    private func integer<Integer: FixedWidthInteger>(from bytes: Data, as type: Integer.Type) -> Integer {
        bytes.reduce(Integer(0)) { $0 << 8 | Integer($1) }
    }
}

extension StreamInbox.Delivery {
    /// The delivery in Apple's `(content, metadata)` shape.
    var withMetadata: (content: Data, metadata: StreamMetadata) { (content, StreamMetadata(isEndOfStream: endOfStream)) }
}
