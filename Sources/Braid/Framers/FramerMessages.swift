import BraidCore

/// One framer connection's messages in transit between the application and its framer layer.
/// Above the layer each message travels on the connection's byte stream as a TLV record whose
/// type field is a number this table gives its `NWProtocolFramer.Message` (the metadata cannot
/// ride in bytes: its values are the application's objects). A sender registers its message
/// before queuing the record, so the layer always finds it; the layer registers each message it
/// delivers before writing the record, so the receiver always finds it. Entries live as long as
/// their record is unread; the table dies with the connection.
final class FramerMessages: Sendable {
    /// A record's type field: the number (31 bits; 0: no message object), and this bit when the
    /// message is not complete (a classic send with `isComplete` false).
    static let incompleteBit: UInt32 = 1 << 31

    private struct State {
        var nextOutbound: UInt32 = 0
        var nextInbound: UInt32 = 0
        var outbound: [UInt32: NWProtocolFramer.Message] = [:]
        var inbound: [UInt32: NWProtocolFramer.Message] = [:]
    }

    private let state = Locked(State())
    /// Over datagrams, the most inbound entries kept (a message the channel's inbox dropped is
    /// never taken): registering one forgets the entry this many numbers older.
    private let inboundLimit: UInt32?

    init(inboundLimit: Int? = nil) {
        self.inboundLimit = inboundLimit.map { UInt32(clamping: $0) }
    }

    /// The next number in 1...2^31-1, wrapping (never 0).
    private static func advance(_ counter: inout UInt32) -> UInt32 {
        counter = counter % (incompleteBit - 1) + 1
        return counter
    }

    /// The type field for a message the application sends (0 without a message object).
    func registerOutbound(_ message: NWProtocolFramer.Message?) -> UInt32 {
        guard let message else { return 0 }
        return state.withLock { state in
            let number = Self.advance(&state.nextOutbound)
            state.outbound[number] = message
            return number
        }
    }

    func takeOutbound(_ number: UInt32) -> NWProtocolFramer.Message? {
        guard number != 0 else { return nil }
        return state.withLock { $0.outbound.removeValue(forKey: number) }
    }

    /// The type field for a message the framer delivers.
    func registerInbound(_ message: NWProtocolFramer.Message) -> UInt32 {
        state.withLock { state in
            let number = Self.advance(&state.nextInbound)
            state.inbound[number] = message
            if let limit = inboundLimit, number > limit { state.inbound[number - limit] = nil }
            return number
        }
    }

    func takeInbound(_ number: UInt32) -> NWProtocolFramer.Message? {
        guard number != 0 else { return nil }
        return state.withLock { $0.inbound.removeValue(forKey: number) }
    }
}
