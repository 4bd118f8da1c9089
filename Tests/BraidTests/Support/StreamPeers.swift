import BraidIO

#if canImport(Glibc)
import Glibc
#endif

/// Byte `offset` of every test stream: a pattern that catches reordered, lost or repeated bytes.
func streamPattern(_ offset: Int) -> UInt8 { UInt8(truncatingIfNeeded: offset % 251) }

/// Calls back on readiness; for sockets and listeners in loop tests.
final class ClosureHandler: LoopHandler {
    var onReadable: (LoopContext) -> Void = { _ in }
    var onWritable: (LoopContext) -> Void = { _ in }
    var onTimer: (LoopContext) -> Void = { _ in }
    private(set) var readableCalls = 0
    private(set) var writableCalls = 0

    func readable(_ context: LoopContext) {
        readableCalls += 1
        onReadable(context)
    }
    func writable(_ context: LoopContext) {
        writableCalls += 1
        onWritable(context)
    }
    func timerFired(_ context: LoopContext) { onTimer(context) }
    func close(_ context: LoopContext) {}
}

/// Accepts every waiting connection of a listener and hands each to `onAccept`.
final class Acceptor: LoopHandler {
    let listener: any ByteStreamListener
    var onAccept: (any ByteStreamSocket) -> Void = { _ in }
    var onError: (any Error) -> Void = { _ in }
    private(set) var readableCalls = 0

    init(_ listener: any ByteStreamListener) { self.listener = listener }

    func readable(_ context: LoopContext) {
        readableCalls += 1
        do {
            while let socket = try listener.acceptSocket() { onAccept(socket) }
        } catch {
            onError(error)
        }
    }
    func writable(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) {}
    func close(_ context: LoopContext) { listener.close() }
}

/// Writes `total` pattern bytes with gathered writes of several regions of uneven sizes
/// (out of one buffer, as a connection's queued sends would be), resuming on writable after a
/// short write. For a client socket, the first writable finishes the connect.
final class StreamSender: LoopHandler {
    let socket: any ByteStreamSocket
    let total: Int
    private let data: UnsafeMutableRawBufferPointer
    private let regionSizes: [Int]
    private(set) var offset = 0
    private(set) var connected: Bool
    /// Writes that took less than offered, and those that took nothing.
    private(set) var shortWrites = 0
    private(set) var zeroWrites = 0
    /// Regions offered per write, at most.
    var regionsPerWrite = 8
    /// Stop writing (to let a test look at a full socket) until `resume`.
    var stopAtFirstShortWrite = false
    private(set) var stoppedShort = false
    var onConnected: () -> Void = {}
    var onFinished: () -> Void = {}
    var onError: (any Error) -> Void = { _ in }

    init(socket: any ByteStreamSocket, total: Int, regionSizes: [Int] = [1000, 7000, 3, 65536, 20000, 1448], connected: Bool) {
        self.socket = socket
        self.total = total
        self.regionSizes = regionSizes
        self.connected = connected
        data = .allocate(byteCount: max(total, 1), alignment: 16)
        for index in 0..<total { data[index] = streamPattern(index) }
    }

    deinit { data.deallocate() }

    func readable(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) {}
    func close(_ context: LoopContext) { socket.close() }

    func writable(_ context: LoopContext) {
        if !connected {
            do {
                try socket.finishConnect()
            } catch {
                socket.setWantsWritable(false)
                onError(error)
                return
            }
            connected = true
            onConnected()
        }
        pump()
    }

    /// Writes again after `stopAtFirstShortWrite` stopped it; stops again at the next short
    /// write when `stoppingShort`.
    func resume(stoppingShort: Bool = false) {
        stoppedShort = false
        stopAtFirstShortWrite = stoppingShort
        pump()
    }

    /// Writes until done or the socket is full (then waits for writable).
    func pump() {
        var regionIndex = 0
        while offset < total {
            var offered = 0
            let written: Int
            do {
                written = try socket.write { regions in
                    var at = offset
                    var count = 0
                    while at < total, count < regionsPerWrite, !regions.isFull {
                        let size = min(regionSizes[regionIndex % regionSizes.count], total - at)
                        regions.append(UnsafeRawBufferPointer(rebasing: data[at..<at + size]))
                        at += size
                        count += 1
                        regionIndex += 1
                    }
                    offered = at - offset
                }
            } catch {
                socket.setWantsWritable(false)
                onError(error)
                return
            }
            offset += written
            if written < offered {
                shortWrites += 1
                if written == 0 { zeroWrites += 1 }
                if stopAtFirstShortWrite {
                    stoppedShort = true
                    socket.setWantsWritable(false)
                    return
                }
                socket.setWantsWritable(true)
                return
            }
        }
        socket.setWantsWritable(false)
        onFinished()
    }
}

/// Reads everything into a 64 KiB buffer, checking the pattern, until end of stream.
final class StreamReceiver: LoopHandler {
    let socket: any ByteStreamSocket
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
    private(set) var received = 0
    private(set) var intact = true
    private(set) var endOfStream = false
    private(set) var readableCalls = 0
    /// Reads per readable report at most (a reader that takes only some of what waits).
    var readsPerReadable = Int.max
    var onProgress: (StreamReceiver) -> Void = { _ in }
    var onError: (any Error) -> Void = { _ in }

    init(socket: any ByteStreamSocket) { self.socket = socket }

    deinit { buffer.deallocate() }

    func writable(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) {}
    func close(_ context: LoopContext) { socket.close() }

    func readable(_ context: LoopContext) {
        readableCalls += 1
        var reads = 0
        while reads < readsPerReadable {
            reads += 1
            let result: StreamReadResult
            do {
                result = try socket.read(into: buffer)
            } catch {
                socket.setWantsReadable(false)
                onError(error)
                return
            }
            switch result {
            case .bytes(let count):
                for index in 0..<count where buffer[index] != streamPattern(received + index) {
                    intact = false
                    break
                }
                received += count
            case .wouldBlock:
                onProgress(self)
                return
            case .endOfStream:
                endOfStream = true
                socket.setWantsReadable(false)
                onProgress(self)
                return
            }
        }
        onProgress(self)
    }
}

/// Reads the whole of an integer socket option.
func socketOption(_ fd: Int32, _ level: Int32, _ name: Int32) -> Int32? {
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, level, name, &value, &length) == 0 ? value : nil
}

/// Waits (poll) until `fd` is ready for `events`, up to `timeout` milliseconds.
@discardableResult
func waitFor(_ fd: Int32, _ events: Int16, timeout: Int32 = 5000) -> Bool {
    var entry = pollfd(fd: fd, events: events, revents: 0)
    return poll(&entry, 1, timeout) == 1
}
