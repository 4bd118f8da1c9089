import BraidCore
import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// The memory one receive or one flush of a `UDPSocket` works in: `slots` slots of
/// `slotBytes` datagram bytes each, and headers, addresses and control messages for
/// `messages` messages.
///
/// A socket holds an area only while it uses it: a receive takes one for the call, a send
/// queue from its first batch until it is flushed empty. Idle sockets (an idle client
/// connection has one each) then hold none of this memory; busy ones reuse the same few
/// areas from `UDPMessageAreaPool` instead of allocating.
final class UDPMessageArea: @unchecked Sendable {
    // Unchecked: an area is used by one socket at a time, on that socket's loop; between uses
    // it sits in the pool behind its lock, untouched.
    let slots: Int
    let slotBytes: Int
    let messageCount: Int
    let data: UnsafeMutableRawBufferPointer
    let messages: UnsafeMutablePointer<braid_mmsghdr>
    let iovecs: UnsafeMutablePointer<iovec>
    let names: UnsafeMutablePointer<sockaddr_storage>
    let control: UnsafeMutableRawPointer

    init(slots: Int, slotBytes: Int, messages messageCount: Int) {
        self.slots = slots
        self.slotBytes = slotBytes
        self.messageCount = messageCount
        data = .allocate(byteCount: slots * slotBytes, alignment: 64)
        messages = .allocate(capacity: messageCount)
        iovecs = .allocate(capacity: messageCount)
        names = .allocate(capacity: messageCount)
        control = .allocate(byteCount: messageCount * Int(BRAID_UDP_CMSG_CAPACITY), alignment: 16)
    }

    deinit {
        data.deallocate()
        messages.deallocate()
        iovecs.deallocate()
        names.deallocate()
        control.deallocate()
    }

    /// Slot `index`'s bytes.
    func slot(_ index: Int) -> UnsafeMutableRawPointer { data.baseAddress! + index * slotBytes }
}

/// Areas kept for reuse, by shape: at most `areasPerShape` of each (a few MiB in all), so the
/// pool stays small while every loop's sockets find one ready.
enum UDPMessageAreaPool {
    static let areasPerShape = 4

    private struct Shape: Hashable {
        var slots: Int
        var slotBytes: Int
        var messages: Int
    }

    private static let free = Locked<[Shape: [UDPMessageArea]]>([:])

    static func take(slots: Int, slotBytes: Int, messages: Int) -> UDPMessageArea {
        let shape = Shape(slots: slots, slotBytes: slotBytes, messages: messages)
        let kept = free.withLock { $0[shape]?.popLast() }
        return kept ?? UDPMessageArea(slots: slots, slotBytes: slotBytes, messages: messages)
    }

    static func give(_ area: UDPMessageArea) {
        let shape = Shape(slots: area.slots, slotBytes: area.slotBytes, messages: area.messageCount)
        // Past the bound, `area` is released here when the last reference goes.
        free.withLock { free in
            if free[shape, default: []].count < areasPerShape { free[shape, default: []].append(area) }
        }
    }
}
