import BraidIO

/// A layer that passes bytes through unchanged, ready at once: what a layer that runs over
/// another (WebSocket) stands on over plain TCP, so it always has a layer below it. Its input
/// and output are bounded like TLS's (`capacity` each).
package final class PlainByteStreamLayer: ByteStreamLayer {
    private let capacity: Int
    private var input: [UInt8] = []
    private var output: [UInt8] = []
    private var outputStart = 0
    private var reportedReady = false
    package private(set) var isClosed = false

    package init(capacity: Int = 64 * 1024) {
        self.capacity = capacity
    }

    package var bufferedInputCount: Int { input.count }

    package func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        let room = max(minimum, capacity - input.count)
        let start = input.count
        input.append(contentsOf: repeatElement(0, count: room))
        var written = 0
        defer { input.removeLast(room - written) }
        written = try input.withUnsafeMutableBytes { try body(UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
        return written
    }

    package func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents {
        var events: ByteStreamLayerEvents = []
        if !reportedReady {
            reportedReady = true
            events.insert(.becameReady)
        }
        if !input.isEmpty {
            input.withUnsafeBytes { deliver($0) }
            input.removeAll(keepingCapacity: true)
        }
        return events
    }

    package func endOfInput() throws {}

    package var sendsEarlyData: Bool { false }

    package func sendEarly(_ bytes: UnsafeRawBufferPointer) throws -> Int { 0 }

    package func send(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        guard !isClosed else { return bytes.count }
        let count = min(bytes.count, max(0, capacity - pendingOutputCount))
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<count]))
        return count
    }

    package func seal() throws {}

    package var heldByteCount: Int { pendingOutputCount }

    package func close() { isClosed = true }

    package var pendingOutputCount: Int { output.count - outputStart }

    package func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        guard pendingOutputCount > 0 else { return 0 }
        let taken = try output.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[outputStart...])) }
        outputStart += taken
        if outputStart == output.count {
            output.removeAll(keepingCapacity: true)
            outputStart = 0
        }
        return taken
    }

    package var negotiatedALPN: String? { nil }
    package var isResumed: Bool { false }
    package var earlyDataAccepted: Bool { false }
}
