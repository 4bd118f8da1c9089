import BraidIO

/// A layer that passes bytes through unchanged, ready at once: what a layer that runs over
/// another (WebSocket) stands on over plain TCP, so it always has a layer below it. Its input
/// and output are bounded like TLS's (`capacity` each); the input is one buffer the socket
/// reads into and `process` hands on whole.
package final class PlainByteStreamLayer: ByteStreamLayer {
    /// Never used: a plain layer waits on nothing.
    package var requestProcessing: (@Sendable () -> Void)?
    private let capacity: Int
    private var input: [UInt8]
    private var inputCount = 0
    private var output: [UInt8] = []
    private var outputStart = 0
    private var reportedReady = false
    package private(set) var isClosed = false

    package init(capacity: Int = 64 * 1024) {
        self.capacity = capacity
        input = [UInt8](repeating: 0, count: capacity)
    }

    package var bufferedInputCount: Int { inputCount }

    package func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        if input.count - inputCount < minimum { input += [UInt8](repeating: 0, count: minimum - (input.count - inputCount)) }
        let start = inputCount
        let written = try input.withUnsafeMutableBytes { try body(UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
        inputCount += written
        return written
    }

    package func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents {
        var events: ByteStreamLayerEvents = []
        if !reportedReady {
            reportedReady = true
            events.insert(.becameReady)
        }
        if inputCount > 0 {
            let count = inputCount
            input.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            inputCount = 0
        }
        return events
    }

    package func endOfInput() throws -> Bool { false }

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
