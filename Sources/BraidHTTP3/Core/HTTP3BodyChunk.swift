import BraidCore

/// What a body source gives when the engine asks it for more of a message body.
public enum HTTP3BodyChunk: Sendable {
    /// The next bytes of the body. The engine keeps a reference to them until they leave in a
    /// write (`HTTP3StreamWrite` passes the same `StreamBytes` on), and never copies them.
    /// An empty range counts as `.pending`.
    case bytes(StreamBytes, Range<Int>)
    /// Nothing now: the engine asks again after `HTTP3Connection.resumeBody(streamID:)`.
    case pending
    /// The body is complete; `trailers`, if not empty, are sent after it.
    case end(trailers: [HTTP3Field])

    /// Bytes copied from an array (convenient for small bodies and tests).
    public static func copying(_ bytes: [UInt8]) -> HTTP3BodyChunk {
        let stored = StreamBytes(copying: bytes)
        return .bytes(stored, 0..<stored.count)
    }
}

/// A message body the engine pulls from, one chunk at a time, as the stream can take it: the
/// engine asks for the next chunk only after the previous one went into a write, so the
/// caller's `nextWrite(maxBytes:)` pace (the QUIC layer's room) is the backpressure. Called on
/// the engine's thread, inside the engine: it must not call the engine back (to say more is
/// ready later, return `.pending` and call `resumeBody(streamID:)` afterwards).
public typealias HTTP3BodySource = () -> HTTP3BodyChunk
