// Bulk transfer baselines: `raw-client` sends N bytes to `raw-server` over UDP, UDP with GSO/GRO,
// TCP or TLS on loopback; the server counts what arrives.
//
// UDP has no end of stream, so the client ends with a marker: a 1-byte datagram holding
// `endMarker`, sent `markerCount` times `markerInterval` apart (payload bytes are never
// `endMarker`). The server also gives up 2 s after the last datagram once data has started.
#if canImport(Glibc)
import Glibc
#endif

extension RawBaselines {
    static let payloadByte: UInt8 = 0x61
    static let endMarker: UInt8 = 0xFF
    static let markerCount = 20
    static let markerIntervalMicroseconds: UInt32 = 10_000
    static let datagramIdleSeconds = 2
    /// Datagrams per sendmsg with UDP_SEGMENT (the kernel's limit is 64 or 128 by version).
    static let gsoSegments = 64
    /// The most UDP payload one IPv4 send may carry (65535 - 20 IP - 8 UDP), GSO included.
    static let maxUDPPayload = 65_507

    /// Datagrams per GSO sendmsg for `payload`-byte datagrams: 64 unless that would exceed 64 KiB.
    static func segmentsPerSend(payload: Int) -> Int {
        max(1, min(gsoSegments, maxUDPPayload / payload))
    }
}

// MARK: - raw-server

extension RawBaselines {
    enum BulkServer {
        static func run(_ options: Options) throws {
            let kind = try options.kind()
            let port = try options.port()
            let (bytes, messages): (Int, Int)
            switch kind {
            case .udp, .udpGSO:
                (bytes, messages) = try receiveDatagrams(port: port, gro: kind == .udpGSO)
            case .tcp, .tls:
                var credentials: TLS.Credentials?
                if kind == .tls {
                    credentials = try TLS.Credentials.server(
                        certificate: try options.string("cert"), key: try options.string("key"))
                }
                (bytes, messages) = try receiveStream(port: port, credentials: credentials)
            }
            writeLine("{\"bytes\": \(bytes), \"messages\": \(messages)}")
        }

        private static func receiveStream(port: UInt16, credentials: TLS.Credentials?) throws -> (Int, Int) {
            let listener = try Sockets.listener(port: port, backlog: 1)
            writeLine("listening \(try Sockets.localPort(listener))")
            let fd = try Sockets.accept(listener)
            close(listener)
            defer { close(fd) }

            let capacity = 256 << 10
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
            defer { buffer.deallocate() }
            var bytes = 0
            var messages = 0
            if let credentials {
                let session = try TLS.Session.server(credentials, socket: fd)
                try session.handshake()
                while let received = try session.receive(buffer, capacity) {
                    bytes += received
                    messages += 1
                }
            } else {
                while let received = try Sockets.receive(fd, buffer, capacity) {
                    bytes += received
                    messages += 1
                }
            }
            return (bytes, messages)
        }

        private static func receiveDatagrams(port: UInt16, gro: Bool) throws -> (Int, Int) {
            let fd = try Sockets.make(stream: false)
            defer { close(fd) }
            Sockets.enlargeReceiveBuffer(fd)
            if gro, !Sockets.setOption(fd, Sockets.solUDP, Sockets.udpGRO, 1) {
                throw Failure.system("setsockopt UDP_GRO")
            }
            try Sockets.bindLoopback(fd, port: port)
            writeLine("listening \(try Sockets.localPort(fd))")

            let capacity = 64 << 10
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
            defer { buffer.deallocate() }
            // Room for one UDP_GRO control message (an int), 8-byte aligned.
            let controlCapacity = 64
            let control = UnsafeMutableRawPointer.allocate(byteCount: controlCapacity, alignment: 8)
            defer { control.deallocate() }
            var iov = iovec(iov_base: buffer, iov_len: capacity)

            var bytes = 0
            var messages = 0
            var started = false
            while true {
                let received: Int
                var segmentSize = 0
                if gro {
                    received = withUnsafeMutablePointer(to: &iov) { iovPointer in
                        var header = msghdr()
                        header.msg_iov = iovPointer
                        header.msg_iovlen = 1
                        header.msg_control = control
                        header.msg_controllen = controlCapacity
                        let count = recvmsg(fd, &header, 0)
                        if count > 0 { segmentSize = groSegmentSize(control, header.msg_controllen) }
                        return count
                    }
                } else {
                    received = recv(fd, buffer, capacity, 0)
                }
                if received < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK { break }  // idle timeout once started
                    throw Failure.system(gro ? "recvmsg" : "recv")
                }
                if received == 0 { continue }
                if !started {
                    started = true
                    try Sockets.setReceiveTimeout(fd, seconds: datagramIdleSeconds)
                }
                // The marker arrives alone, or (with GRO) as the short last segment of a batch.
                let last = buffer.load(fromByteOffset: received - 1, as: UInt8.self)
                let trailing = segmentSize > 0 ? (received - 1) % segmentSize + 1 : received
                let sawMarker = trailing == 1 && last == endMarker
                let payload = sawMarker ? received - 1 : received
                if payload > 0 {
                    bytes += payload
                    messages += 1
                }
                if sawMarker { break }
            }
            return (bytes, messages)
        }

        /// The gso_size from a UDP_GRO control message, 0 when there is none (a single datagram).
        private static func groSegmentSize(_ control: UnsafeMutableRawPointer, _ length: Int) -> Int {
            let headerSize = MemoryLayout<cmsghdr>.size
            var offset = 0
            while offset + headerSize <= length {
                let header = control.load(fromByteOffset: offset, as: cmsghdr.self)
                guard header.cmsg_len >= headerSize, offset + header.cmsg_len <= length else { return 0 }
                if header.cmsg_level == Sockets.solUDP && header.cmsg_type == Sockets.udpGRO
                    && header.cmsg_len >= headerSize + MemoryLayout<Int32>.size
                {
                    return Int(control.load(fromByteOffset: offset + headerSize, as: Int32.self))
                }
                offset += (header.cmsg_len + 7) & ~7
            }
            return 0
        }
    }
}

// MARK: - raw-client

extension RawBaselines {
    enum BulkClient {
        static func run(_ options: Options) throws {
            let kind = try options.kind()
            let port = try options.port()
            guard port != 0 else { throw Failure("--port is required") }
            let total = try options.int("bytes")
            let payload = try options.int("payload")
            guard payload > 0 else { throw Failure("--payload must be positive") }
            if kind.isDatagram && payload > maxUDPPayload {
                throw Failure("--payload \(payload) exceeds the largest UDP datagram (\(maxUDPPayload))")
            }

            let fd = try Sockets.make(stream: !kind.isDatagram)
            defer { close(fd) }
            try Sockets.connectLoopback(fd, port: port)
            var session: TLS.Session?
            if kind == .tls {
                let credentials = try TLS.Credentials.client(trusting: try options.string("ca"))
                session = try TLS.Session.client(
                    credentials, serverName: options.optional("sni") ?? "localhost", socket: fd)
                try session?.handshake()
            }

            let chunk = kind == .udpGSO ? payload * segmentsPerSend(payload: payload) : payload
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: payloadByte, count: chunk)

            // `--rate` (Mbit/s of payload, UDP one datagram per call only): the same pacing as
            // Braid's `udp-client`, so both receivers see the same load.
            let rate = try options.int("rate", default: 0)
            if rate > 0 && kind != .udp { throw Failure("--rate is for --kind udp") }
            let start = now()
            let calls: Int
            switch kind {
            case .udp: calls = try sendDatagrams(fd, buffer, total: total, payload: payload, megabitsPerSecond: rate)
            case .udpGSO: calls = try sendSegmented(fd, buffer, total: total, payload: payload, chunk: chunk)
            case .tcp, .tls: calls = try sendStream(fd, session, buffer, total: total, chunk: chunk)
            }
            let end = now()
            if kind.isDatagram { sendEndMarkers(fd) }
            writeLine(
                "{\"bytes\": \(total), \"seconds\": \(jsonNumber(seconds(from: start, to: end))), \"calls\": \(calls)}")
        }

        /// Errors after which a datagram send is simply tried again: a full queue, or the ICMP error
        /// of an earlier datagram reported on this connected socket.
        private static func shouldRetry(_ code: Int32) -> Bool {
            code == EINTR || code == EAGAIN || code == EWOULDBLOCK || code == ENOBUFS || code == ECONNREFUSED
        }

        /// One `send` per datagram; with `megabitsPerSecond`, every 64 datagrams it sleeps until
        /// the bytes sent so far are due at that rate.
        private static func sendDatagrams(
            _ fd: Int32, _ buffer: UnsafeRawPointer, total: Int, payload: Int, megabitsPerSecond: Int = 0
        ) throws -> Int {
            var remaining = total
            var calls = 0
            var datagrams = 0
            var start = timespec()
            clock_gettime(CLOCK_MONOTONIC, &start)
            while remaining > 0 {
                let sent = send(fd, buffer, min(payload, remaining), 0)
                calls += 1
                if sent < 0 {
                    if shouldRetry(errno) { continue }
                    throw Failure.system("send")
                }
                remaining -= sent
                datagrams += 1
                if megabitsPerSecond > 0 && datagrams % 64 == 0 {
                    let dueNanoseconds = (total - remaining) * 8 * 1000 / megabitsPerSecond
                    let due = start.tv_nsec + dueNanoseconds % 1_000_000_000
                    var until = timespec(tv_sec: start.tv_sec + dueNanoseconds / 1_000_000_000 + due / 1_000_000_000, tv_nsec: due % 1_000_000_000)
                    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nil) == EINTR {}
                }
            }
            return calls
        }

        private static func sendSegmented(
            _ fd: Int32, _ buffer: UnsafeMutableRawPointer, total: Int, payload: Int, chunk: Int
        ) throws -> Int {
            // One UDP_SEGMENT control message carrying the segment size (a uint16).
            let headerSize = MemoryLayout<cmsghdr>.size
            let controlLength = (headerSize + MemoryLayout<UInt16>.size + 7) & ~7
            let control = UnsafeMutableRawPointer.allocate(byteCount: controlLength, alignment: 8)
            defer { control.deallocate() }
            control.initializeMemory(as: UInt8.self, repeating: 0, count: controlLength)
            var header = cmsghdr()
            header.cmsg_len = headerSize + MemoryLayout<UInt16>.size
            header.cmsg_level = Sockets.solUDP
            header.cmsg_type = Sockets.udpSegment
            control.storeBytes(of: header, as: cmsghdr.self)
            control.storeBytes(of: UInt16(payload), toByteOffset: headerSize, as: UInt16.self)

            var iov = iovec(iov_base: buffer, iov_len: 0)
            var remaining = total
            var calls = 0
            try withUnsafeMutablePointer(to: &iov) { iovPointer in
                var message = msghdr()
                message.msg_iov = iovPointer
                message.msg_iovlen = 1
                message.msg_control = control
                message.msg_controllen = controlLength
                while remaining > 0 {
                    let length = min(chunk, remaining)
                    iovPointer.pointee.iov_len = length
                    let sent = sendmsg(fd, &message, 0)
                    calls += 1
                    if sent < 0 {
                        if shouldRetry(errno) { continue }
                        throw Failure.system("sendmsg with UDP_SEGMENT \(payload) (\(length) bytes)")
                    }
                    remaining -= sent
                }
            }
            return calls
        }

        private static func sendStream(
            _ fd: Int32, _ session: TLS.Session?, _ buffer: UnsafeRawPointer, total: Int, chunk: Int
        ) throws -> Int {
            var remaining = total
            var calls = 0
            while remaining > 0 {
                let length = min(chunk, remaining)
                if let session {
                    calls += try session.sendAll(buffer, length)
                } else {
                    calls += try Sockets.sendAll(fd, buffer, length)
                }
                remaining -= length
            }
            // End of stream, then wait for the server to close: everything has been received.
            try session?.bye()
            try Sockets.check(shutdown(fd, Int32(SHUT_WR)), "shutdown")
            try Sockets.drain(fd)
            return calls
        }

        /// The UDP end marker, `markerCount` times; stops early once the server's port is closed.
        private static func sendEndMarkers(_ fd: Int32) {
            var marker = endMarker
            for index in 0..<markerCount {
                if index > 0 { usleep(markerIntervalMicroseconds) }
                if send(fd, &marker, 1, 0) < 0 && errno == ECONNREFUSED { return }
            }
        }
    }
}
