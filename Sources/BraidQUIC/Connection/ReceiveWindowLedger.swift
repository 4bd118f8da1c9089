/// A connection's receive windows as Braid granted them: what the peer may send on the
/// connection, what ngtcp2 handed over so far, and, when Braid tunes the windows instead of
/// ngtcp2, the credit read back and not yet granted again. (Each stream's part is in its
/// `StreamState`.)
///
/// ngtcp2 0.12.1 keeps a stream's out-of-order bytes in its own reassembly buffer and has no
/// getter for them; what it may hold is bounded by what was granted and not yet handed over
/// (`QUICConnection.engineReceiveBound`), so a listener's buffer limit can count that.
struct ReceiveWindowLedger {
    /// The receive windows a connection announces in its transport parameters.
    struct Initial {
        var connection: UInt64
        var bidirectionalLocal: UInt64
        var bidirectionalRemote: UInt64
        var unidirectional: UInt64
    }

    /// ngtcp2's reassembly buffer holds bytes in pieces of this size aligned on the stream's
    /// offsets (`ngtcp2_rob`, 8 KiB chunks in `ngtcp2_strm.c`).
    static let pieceSize: UInt64 = 8 * 1024
    /// A reassembly buffer's own memory, once a stream has one (its first out-of-order bytes):
    /// two skip lists that each allocate an 8 KiB block of nodes, and the buffer itself.
    static let reassemblyOverhead: UInt64 = 16 * 1024 + 256
    /// What ngtcp2 keeps of a peer-opened unidirectional stream it never frees (0.12.1) besides
    /// its reassembly buffer: the stream object, its table entries, the buffer's own header
    /// and gap record, and the allocator's headers of each.
    static let retainedStreamOverhead: UInt64 = 512

    let initial: Initial
    /// The connection's limit as Braid granted it so far: our `initial_max_data` plus every
    /// `ngtcp2_conn_extend_max_offset` Braid made (ngtcp2's own grants for streams that end
    /// early are left out: see `QUICConnection.engineReceiveBound`).
    var connectionGranted: UInt64
    /// Stream bytes ngtcp2 handed over in order, all streams.
    var delivered: UInt64 = 0

    /// Braid tunes the windows (ngtcp2's auto-tuning is off): credit read back waits until
    /// half a window has gathered, and a window doubles (up to its maximum) when it is granted
    /// again within two round trips, as ngtcp2 would do it.
    let tunes: Bool
    let maxConnectionWindow: UInt64
    let maxStreamWindow: UInt64
    /// The connection's window now (tuned: grows from its initial value).
    var connectionWindow: UInt64
    /// Connection credit read back and not yet granted (tuned only).
    var connectionPending: UInt64 = 0
    /// When the connection's credit was last granted (tuned only).
    var lastConnectionGrant: UInt64?
    /// The owner's listener is at its buffer limit: tuned windows do not grow, and credit read
    /// back waits until it is under the limit again (`QUICConnection.withholdReceiveCredit`).
    var withheld = false

    /// What ngtcp2 keeps of peer-opened unidirectional streams Braid already forgot (0.12.1
    /// never frees them): each one's object, and what its reassembly buffer may still hold.
    var retainedBytes: UInt64 = 0

    init(initial: Initial, tunes: Bool, maxConnectionWindow: UInt64, maxStreamWindow: UInt64) {
        self.initial = initial
        connectionGranted = initial.connection
        connectionWindow = initial.connection
        self.tunes = tunes
        self.maxConnectionWindow = maxConnectionWindow
        self.maxStreamWindow = maxStreamWindow
    }

    /// The most bytes of a stream's reassembly pieces when ngtcp2 handed over its bytes up
    /// to `delivered` and the peer may send up to `limit`: the pieces covering what lies
    /// between, and the piece holding `delivered`, which stays until it is handed over whole.
    /// (The buffer's own memory, `reassemblyOverhead`, comes on top.)
    static func pieces(delivered: UInt64, limit: UInt64) -> UInt64 {
        let first = delivered / pieceSize * pieceSize
        let last = (max(limit, delivered) + pieceSize - 1) / pieceSize * pieceSize
        guard limit > delivered || delivered % pieceSize != 0 else { return 0 }
        return max(last - first, pieceSize)
    }
}
