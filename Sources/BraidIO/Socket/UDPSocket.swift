import BraidCore
import CBraidUDP
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking UDP socket that moves batches of datagrams with as few system calls as the kernel
/// allows: GSO (UDP_SEGMENT) and sendmmsg out; GRO (UDP_GRO) and recvmmsg in; ECN both ways;
/// IP_PKTINFO so a wildcard-bound socket answers from the address it was reached on; DF
/// (IP_PMTUDISC_PROBE) so path-MTU probes are not fragmented. Every system call is counted.
///
/// All buffers are allocated once; sending and receiving allocate nothing.
/// Confined to one thread (its event loop).
public final class UDPSocket {
    public let fd: Int32
    /// The bound address (with the port the kernel chose when 0 was asked for).
    public let localAddress: SocketAddress
    /// The batching in effect: what was asked for, less what the kernel lacks or what failed.
    public private(set) var batching: BatchingOptions
    public private(set) var counters = SocketCounters()
    /// Socket buffer sizes the kernel granted.
    public let receiveBufferBytes: Int
    public let sendBufferBytes: Int
    /// The last error a send reported (the datagram was dropped), for diagnostics.
    public private(set) var lastSendError: Int32 = 0

    /// Test hook: the next sends that carry UDP_SEGMENT fail with these errno values instead
    /// of reaching the kernel, to exercise the fallback to one datagram per message.
    package var injectedSegmentationErrors: [Int32] = []

    public static let segmentSlotBytes = 65536
    private static let requestedBufferBytes: Int32 = 4 << 20

    private let logger: Logger
    private let isIPv6: Bool
    /// The DSCP code point of every datagram (the upper six bits of IP_TOS / IPV6_TCLASS).
    package let dscp: UInt8
    private let answersFromPacketAddress: Bool
    /// Bound to `::` with IPV6_V6ONLY off: IPv4 peers arrive as ::ffff:a.b.c.d and are
    /// reported (and addressed) as plain IPv4, with IPv4 control messages.
    private let isDualStack: Bool

    // Receive side: `receiveSlots` slots of one message each, in an area taken from
    // `UDPMessageAreaPool` for the duration of each receive.
    private let receiveSlots: Int
    private let receiveSlotBytes: Int

    // Send side: queued batches, written or copied into the send area's slots.
    private struct Pending {
        var offset: Int
        var length: Int
        var segmentSize: Int
        var metadata: DatagramMetadata
        var sentBytes = 0
    }
    private let maxPendingBatches: Int
    /// Batch `i` lives in slot `i` of `sendArea`.
    private var pending: [Pending] = []
    /// Held from the first queued batch until the queue is flushed empty (nil while idle).
    private var sendArea: UDPMessageArea?
    private let maxMessages: Int
    /// For each built message: its batch, its byte count, and its segment count (>1: GSO).
    private var txMessageBatch: [Int] = []
    private var txMessageBytes: [Int] = []
    private var txMessageSegments: [Int] = []

    /// Makes the kernel deliver each short-header packet to the socket of this SO_REUSEPORT
    /// group whose index equals byte `offset` of the packet's destination connection ID.
    public func attachConnectionIDSteering(offset: Int = 0) throws {
        guard (0..<20).contains(offset) else { throw DatapathError.system("steering offset \(offset) (a connection ID has 20 bytes at most)", EINVAL) }
        guard braid_attach_connection_id_steering(fd, UInt32(offset)) == 0 else {
            throw DatapathError.system("setsockopt(SO_ATTACH_REUSEPORT_CBPF)", errno)
        }
    }

    /// Opens and binds a socket.
    /// - Parameters:
    ///   - receiveSlots: messages per receive call (recvmmsg); each slot holds 64 KiB when GRO
    ///     is on (a GRO super-packet), else one datagram of up to 64 KiB as well, so nothing
    ///     is ever truncated silently.
    ///   - sendBatches: batches (of up to 64 datagrams each) that can be queued before a flush.
    ///   - reusePort: SO_REUSEPORT, for several sockets on one port (one per loop).
    ///   - device: the interface the socket is bound to (SO_BINDTODEVICE) before its address;
    ///     nil: any.
    ///   - dscp: the DSCP code point (0-63) every datagram is marked with (IP_TOS or
    ///     IPV6_TCLASS, with each message's ECN bits); 0: unmarked.
    public init(
        bindTo address: SocketAddress, batching requested: BatchingOptions = .all, receiveSlots: Int = 16,
        sendBatches: Int = 16, reusePort: Bool = false, device: String? = nil, dscp: UInt8 = 0,
        logger: Logger? = nil
    ) throws {
        let logger = logger ?? BraidLog.logger(label: "braid.io")
        self.logger = logger
        self.dscp = dscp & 0x3F
        isIPv6 = address.isIPv6
        isDualStack = address.isIPv6 && address.isWildcard
        let family = isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DatapathError.system("socket", errno) }
        self.fd = fd
        var batching = requested
        do {
            func set(_ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws {
                var value = value
                guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
                    throw DatapathError.system("setsockopt(\(what))", errno)
                }
            }
            if reusePort { try set(SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT") }
            if let device { try SocketDevice.bind(fd, to: device) }
            if dscp != 0 {
                let tos = Int32(dscp & 0x3F) << 2
                if isIPv6 {
                    try set(Int32(IPPROTO_IPV6), IPV6_TCLASS, tos, "IPV6_TCLASS")
                } else {
                    try set(Int32(IPPROTO_IP), IP_TOS, tos, "IP_TOS")
                }
            }
            if isDualStack {
                try DualStack.acceptIPv4(on: fd)
                // What IPv4 peers send and are sent goes by IPv4's options on the same socket.
                try set(Int32(IPPROTO_IP), IP_RECVTOS, 1, "IP_RECVTOS")
                try set(Int32(IPPROTO_IP), IP_MTU_DISCOVER, IP_PMTUDISC_PROBE, "IP_MTU_DISCOVER")
                if dscp != 0 { try set(Int32(IPPROTO_IP), IP_TOS, Int32(dscp & 0x3F) << 2, "IP_TOS") }
            }
            if isIPv6 {
                try set(Int32(IPPROTO_IPV6), IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS")
                try set(Int32(IPPROTO_IPV6), IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO")
                try set(Int32(IPPROTO_IPV6), IPV6_MTU_DISCOVER, IPV6_PMTUDISC_PROBE, "IPV6_MTU_DISCOVER")
            } else {
                try set(Int32(IPPROTO_IP), IP_RECVTOS, 1, "IP_RECVTOS")
                try set(Int32(IPPROTO_IP), IP_PKTINFO, 1, "IP_PKTINFO")
                try set(Int32(IPPROTO_IP), IP_MTU_DISCOVER, IP_PMTUDISC_PROBE, "IP_MTU_DISCOVER")
            }
            receiveBufferBytes = Self.growBuffer(fd, force: SO_RCVBUFFORCE, plain: SO_RCVBUF, logger: logger, name: "receive")
            sendBufferBytes = Self.growBuffer(fd, force: SO_SNDBUFFORCE, plain: SO_SNDBUF, logger: logger, name: "send")
            if batching.receiveOffload {
                var one: Int32 = 1
                if setsockopt(fd, Int32(IPPROTO_UDP), BRAID_UDP_GRO, &one, socklen_t(MemoryLayout<Int32>.size)) != 0 {
                    logger.info("UDP_GRO unavailable (\(String(cString: strerror(errno)))); receiving one datagram per message")
                    batching.receiveOffload = false
                }
            }
            if batching.segmentationOffload {
                var size: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                if getsockopt(fd, Int32(IPPROTO_UDP), BRAID_UDP_SEGMENT, &size, &length) != 0 {
                    logger.info("UDP_SEGMENT unavailable (\(String(cString: strerror(errno)))); sending one datagram per message")
                    batching.segmentationOffload = false
                }
            }
            let bound = address.withSockAddr { bind(fd, $0, socklen_t($1)) }
            guard bound == 0 else { throw DatapathError.system("bind(\(address))", errno) }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            guard withUnsafeMutableBytes(of: &storage, { getsockname(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) }) == 0
            else { throw DatapathError.system("getsockname", errno) }
            localAddress = SocketAddress(storage: storage)
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.batching = batching
        answersFromPacketAddress = localAddress.isWildcard

        self.receiveSlots = max(1, receiveSlots)
        receiveSlotBytes = Self.segmentSlotBytes

        maxPendingBatches = max(1, sendBatches)
        maxMessages = maxPendingBatches * UDPSegmentation.maxSegments
        // The send queue's arrays grow as sends need them (a connection that only handshakes
        // and idles needs a few entries; a bulk sender grows them once and keeps them):
        // reserved up front for `maxMessages`, they held 12 KiB in every socket, idle ones
        // included (a QUIC client has one per connection).
    }

    deinit {
        close()
        if let sendArea { UDPMessageAreaPool.give(sendArea) }
    }

    private var isOpen = true

    public func close() {
        guard isOpen else { return }
        isOpen = false
        Glibc.close(fd)
    }

    /// Asks for large socket buffers (bursts of GSO batches overflow the defaults); as root the
    /// FORCE variant passes the sysctl cap. Returns the granted size and logs when capped.
    private static func growBuffer(_ fd: Int32, force: Int32, plain: Int32, logger: Logger, name: String) -> Int {
        var wanted = requestedBufferBytes
        let size = socklen_t(MemoryLayout<Int32>.size)
        if setsockopt(fd, SOL_SOCKET, force, &wanted, size) != 0 {
            _ = setsockopt(fd, SOL_SOCKET, plain, &wanted, size)
        }
        var granted: Int32 = 0
        var length = size
        _ = getsockopt(fd, SOL_SOCKET, plain, &granted, &length)
        // Linux reports twice the usable size it set aside.
        if granted < requestedBufferBytes {
            logger.warning(
                "UDP \(name) buffer capped at \(granted) bytes (asked \(requestedBufferBytes)); raise net.core.\(name == "receive" ? "rmem_max" : "wmem_max") to avoid drops under load")
        }
        return Int(granted)
    }

    /// The local address the kernel would route from toward `remote`, with port 0: a client
    /// binds to it (not to the wildcard) so its engine's path names a real address. Throws the
    /// routing error (ENETUNREACH...) when there is no route. With `device`, the route lookup
    /// is limited to that interface (SO_BINDTODEVICE).
    public static func localAddress(toward remote: SocketAddress, device: String? = nil) throws -> SocketAddress {
        let probe = Glibc.socket(remote.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { throw DatapathError.system("socket", errno) }
        defer { Glibc.close(probe) }
        if let device { try SocketDevice.bind(probe, to: device) }
        guard remote.withSockAddr({ Glibc.connect(probe, $0, socklen_t($1)) }) == 0 else {
            throw DatapathError.system("connect(\(remote))", errno)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        guard withUnsafeMutableBytes(of: &storage, { getsockname(probe, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) }) == 0
        else { throw DatapathError.system("getsockname", errno) }
        return SocketAddress(storage: storage).withPort(0)
    }

    /// Connects the socket to `remote`: the kernel then delivers only that peer's datagrams
    /// (and the socket joins the 4-tuple lookup). Sends still name their destination.
    package func connect(to remote: SocketAddress) throws {
        guard remote.withSockAddr({ Glibc.connect(fd, $0, socklen_t($1)) }) == 0 else {
            throw DatapathError.system("connect(\(remote))", errno)
        }
    }

    /// Lets the kernel fragment datagrams larger than the path's MTU (IP_PMTUDISC_WANT), as a
    /// plain UDP socket does, instead of refusing them (the DF probing QUIC wants). For UDP
    /// connections, whose only size limit is then UDP's own.
    package func allowFragmentation() throws {
        var value: Int32 = isIPv6 ? IPV6_PMTUDISC_WANT : IP_PMTUDISC_WANT
        let level = isIPv6 ? Int32(IPPROTO_IPV6) : Int32(IPPROTO_IP)
        let name = isIPv6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER
        guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw DatapathError.system("setsockopt(MTU_DISCOVER)", errno)
        }
    }

    // MARK: - Receive

    /// One receive system call (recvmmsg, or recvmsg when mmsg is off). Each UDP datagram,
    /// GRO super-packets split by their segment size without copying, goes to `body` with
    /// where it came from, where it arrived and its ECN mark. Returns false when nothing was
    /// waiting.
    @discardableResult
    public func receive(_ body: (UnsafeRawBufferPointer, DatagramMetadata) -> Void) -> Bool {
        // A closed socket's descriptor number may already belong to another file.
        guard isOpen else { return false }
        let area = UDPMessageAreaPool.take(slots: receiveSlots, slotBytes: receiveSlotBytes, messages: receiveSlots)
        defer { UDPMessageAreaPool.give(area) }
        let rxMessages = area.messages
        let slots = batching.multiMessage ? receiveSlots : 1
        for index in 0..<slots {
            area.iovecs[index] = iovec(iov_base: area.slot(index), iov_len: receiveSlotBytes)
            rxMessages[index] = braid_mmsghdr(
                msg_hdr: msghdr(
                    msg_name: UnsafeMutableRawPointer(area.names + index), msg_namelen: socklen_t(MemoryLayout<sockaddr_storage>.size),
                    msg_iov: area.iovecs + index, msg_iovlen: 1,
                    msg_control: area.control + index * Int(BRAID_UDP_CMSG_CAPACITY), msg_controllen: Int(BRAID_UDP_CMSG_CAPACITY),
                    msg_flags: 0),
                msg_len: 0)
        }
        var count: Int32
        repeat {
            if batching.multiMessage {
                counters.recvmmsgCalls += 1
                count = braid_recvmmsg(fd, rxMessages, UInt32(slots))
            } else {
                counters.recvmsgCalls += 1
                let length = recvmsg(fd, &rxMessages[0].msg_hdr, 0)
                if length >= 0 { rxMessages[0].msg_len = UInt32(length) }
                count = length >= 0 ? 1 : -1
            }
        } while count < 0 && errno == EINTR
        guard count > 0 else { return false }

        var meta = braid_udp_rx_meta()
        for index in 0..<Int(count) {
            let message = rxMessages[index]
            let length = Int(message.msg_len)
            if message.msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 {
                counters.truncatedMessages += 1
                logger.warning("dropped a UDP message larger than the \(receiveSlotBytes)-byte receive slot")
                continue
            }
            withUnsafePointer(to: message.msg_hdr) { braid_udp_parse_cmsg($0, &meta) }
            var local = localAddress
            if answersFromPacketAddress && meta.has_destination != 0 {
                local = SocketAddress(storage: meta.destination).withPort(localAddress.port)
            }
            var remote = SocketAddress(storage: area.names[index])
            if isDualStack {
                remote = remote.unmappingIPv4
                local = local.unmappingIPv4
            }
            let ecn = ECN(bits: UInt32(meta.ecn))
            let metadata = DatagramMetadata(remote: remote, local: local, ecn: ecn)
            let segmentSize = meta.gro_segment_size > 0 ? Int(meta.gro_segment_size) : length
            let data = UnsafeRawBufferPointer(start: area.slot(index), count: length)
            var segments = 0
            UDPSegmentation.forEachSegment(of: data, segmentSize: segmentSize) { datagram in
                segments += 1
                body(datagram, metadata)
            }
            counters.datagramsReceived += UInt64(segments)
            if ecn != .notECT { counters.ecnMarkedReceived += UInt64(segments) }
            counters.bytesReceived += UInt64(length)
            if segments > 1 {
                counters.groMessages += 1
                counters.groSegments += UInt64(segments)
            }
        }
        return true
    }

    // MARK: - Send

    /// Room for another batch before a flush is needed.
    public var canEnqueue: Bool { pending.count < maxPendingBatches }
    public var hasPending: Bool { !pending.isEmpty }
    /// Whether the socket holds send memory now (only while batches wait to be flushed).
    package var holdsSendArea: Bool { sendArea != nil }

    /// Copies one batch (datagrams of `segmentSize` bytes, the last may be shorter, all to and
    /// from the same addresses) into the send queue. Call only when `canEnqueue`.
    public func enqueue(_ metadata: DatagramMetadata, segmentSize: Int, bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= Self.segmentSlotBytes)
        let slot = freeSlot!
        UnsafeMutableRawBufferPointer(rebasing: slot[0..<bytes.count]).copyMemory(from: bytes)
        commitSlot(metadata, segmentSize: segmentSize, length: bytes.count)
    }

    /// The send-queue memory the next batch goes into (`segmentSlotBytes` long), for writers
    /// that produce packets in place; nil when the queue needs a flush first.
    public var freeSlot: UnsafeMutableRawBufferPointer? {
        guard canEnqueue else { return nil }
        let area = sendArea ?? UDPMessageAreaPool.take(slots: maxPendingBatches, slotBytes: Self.segmentSlotBytes, messages: maxMessages)
        sendArea = area
        return UnsafeMutableRawBufferPointer(start: area.slot(pending.count), count: Self.segmentSlotBytes)
    }

    /// Queues the batch written into `freeSlot`: its first `length` bytes, datagrams of
    /// `segmentSize` bytes (the last may be shorter).
    public func commitSlot(_ metadata: DatagramMetadata, segmentSize: Int, length: Int) {
        precondition(canEnqueue && sendArea != nil && length <= Self.segmentSlotBytes)
        let offset = pending.count * Self.segmentSlotBytes
        pending.append(Pending(offset: offset, length: length, segmentSize: max(segmentSize, 1), metadata: metadata))
    }

    /// Sends everything queued. Returns false when the kernel's buffer filled up: what is left
    /// stays queued; call again once the socket is writable.
    @discardableResult
    public func flush() -> Bool {
        defer {
            // Nothing queued: the area goes back for whichever socket sends next.
            if pending.isEmpty, let area = sendArea {
                sendArea = nil
                UDPMessageAreaPool.give(area)
            }
        }
        guard let area = sendArea else { return true }
        let txMessages = area.messages
        while !pending.isEmpty {
            buildMessages(in: area)
            var next = 0
            var rebuild = false
            while next < txMessageBatch.count {
                let remaining = txMessageBatch.count - next
                var sent: Int
                if txMessageSegments[next] > 1, let injected = injectedSegmentationErrors.first {
                    // Not a system call, so not counted.
                    injectedSegmentationErrors.removeFirst()
                    errno = injected
                    sent = -1
                } else if batching.multiMessage && remaining > 1 {
                    counters.sendmmsgCalls += 1
                    sent = Int(braid_sendmmsg(fd, txMessages + next, UInt32(remaining)))
                } else {
                    counters.sendmsgCalls += 1
                    sent = sendmsg(fd, &txMessages[next].msg_hdr, 0) >= 0 ? 1 : -1
                }
                if sent > 0 {
                    for index in next..<next + sent { accountSent(index) }
                    next += sent
                    continue
                }
                let error = errno
                switch error {
                case EINTR:
                    continue
                case EAGAIN, EWOULDBLOCK, ENOBUFS:
                    compactPending()
                    return false
                case EIO where txMessageSegments[next] > 1, EINVAL where txMessageSegments[next] > 1:
                    // The kernel or the device cannot segment (EIO: no checksum offload).
                    // Resend the rest as one datagram per message; the connection carries on.
                    batching.segmentationOffload = false
                    counters.gsoFallbacks += 1
                    logger.warning("UDP GSO send failed (\(String(cString: strerror(error)))); falling back to one datagram per message")
                    rebuild = true
                default:
                    // Dropped (e.g. EMSGSIZE for a path-MTU probe); the protocol above recovers or reports it.
                    counters.sendErrors += 1
                    lastSendError = error
                    accountDropped(next)
                    next += 1
                    continue
                }
                if rebuild { break }
            }
            compactPending()
            if !rebuild { break }
        }
        return true
    }

    private func accountSent(_ message: Int) {
        let segments = txMessageSegments[message]
        counters.datagramsSent += UInt64(segments)
        counters.bytesSent += UInt64(txMessageBytes[message])
        if segments > 1 {
            counters.gsoBatches += 1
            counters.gsoSegments += UInt64(segments)
        }
        pending[txMessageBatch[message]].sentBytes += txMessageBytes[message]
    }

    private func accountDropped(_ message: Int) {
        pending[txMessageBatch[message]].sentBytes += txMessageBytes[message]
    }

    /// Forgets fully sent batches; the unsent rest moves to the front slots (batch `i` in slot `i`).
    private func compactPending() {
        var kept = 0
        for index in pending.indices {
            var batch = pending[index]
            guard batch.sentBytes < batch.length else { continue }
            let slot = kept * Self.segmentSlotBytes
            let remaining = batch.length - batch.sentBytes
            let data = sendArea!.data.baseAddress!
            memmove(data + slot, data + batch.offset + batch.sentBytes, remaining)
            batch.offset = slot
            batch.length = remaining
            batch.sentBytes = 0
            pending[kept] = batch
            kept += 1
        }
        pending.removeLast(pending.count - kept)
    }

    /// Lays the queued batches out as messages: one per batch with GSO, one per datagram without.
    private func buildMessages(in area: UDPMessageArea) {
        txMessageBatch.removeAll(keepingCapacity: true)
        txMessageBytes.removeAll(keepingCapacity: true)
        txMessageSegments.removeAll(keepingCapacity: true)
        var message = 0
        for (batchIndex, batch) in pending.enumerated() {
            let segments = (batch.length + batch.segmentSize - 1) / batch.segmentSize
            let useGSO = batching.segmentationOffload && segments > 1
            var offset = 0
            while offset < batch.length {
                let length = useGSO ? batch.length : min(batch.segmentSize, batch.length - offset)
                fillMessage(
                    message, in: area, data: area.data.baseAddress! + batch.offset + offset, length: length,
                    segmentSize: useGSO ? batch.segmentSize : 0, batch: batch)
                txMessageBatch.append(batchIndex)
                txMessageBytes.append(length)
                txMessageSegments.append(useGSO ? segments : 1)
                message += 1
                offset += length
            }
        }
    }

    private func fillMessage(
        _ index: Int, in area: UDPMessageArea, data: UnsafeMutableRawPointer, length: Int, segmentSize: Int, batch: Pending
    ) {
        area.iovecs[index] = iovec(iov_base: data, iov_len: length)
        batch.metadata.remote.withSockAddr { address, addressLength in
            UnsafeMutableRawPointer(area.names + index).copyMemory(from: address, byteCount: addressLength)
        }
        let control = area.control + index * Int(BRAID_UDP_CMSG_CAPACITY)
        let withSource = answersFromPacketAddress && !batch.metadata.local.isWildcard
        // A dual-stack socket sends to an IPv4 sockaddr as IPv4 (the kernel takes it as
        // is), and such a datagram's TOS and source go in IPv4's control messages.
        let ipv6Message = isIPv6 && batch.metadata.remote.isIPv6
        let controlLength = batch.metadata.local.withSockAddr { source, _ in
            braid_udp_build_cmsg(
                control, Int(BRAID_UDP_CMSG_CAPACITY), ipv6Message ? 1 : 0, UInt16(segmentSize), batch.metadata.ecn.rawValue, dscp,
                withSource ? source : nil)
        }
        area.messages[index] = braid_mmsghdr(
            msg_hdr: msghdr(
                msg_name: UnsafeMutableRawPointer(area.names + index), msg_namelen: socklen_t(batch.metadata.remote.length),
                msg_iov: area.iovecs + index, msg_iovlen: 1,
                msg_control: controlLength > 0 ? control : nil, msg_controllen: controlLength,
                msg_flags: 0),
            msg_len: 0)
    }
}
