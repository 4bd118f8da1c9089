import BraidIO

/// A `ByteStreamLayer` with nothing of TLS in it, for the byte-stream channel's tests: each side
/// sends one `hello` byte first and is ready once the peer's has arrived; then bytes travel in
/// records of a two-byte length and that many bytes XORed with `mask`; an empty record ends the
/// stream (close_notify's part), and a transport that ends without it is `truncated`.
final class RecordMaskingLayer: ByteStreamLayer {
    enum Failure: Error, Equatable {
        case truncated
        case badHello(UInt8)
        case sendBeforeReady
        case sendAfterClose
    }

    var requestProcessing: (@Sendable () -> Void)?

    static let hello: UInt8 = 0xB5
    static let mask: UInt8 = 0x5A
    static let largestRecord = 1024
    /// `send` takes nothing more while this much output waits.
    static let outputLimit = 8 * 1024
    /// Room for the channel's smallest read (one TLS record) and more.
    static let inputCapacity = 64 * 1024

    private let input = UnsafeMutableRawBufferPointer.allocate(byteCount: RecordMaskingLayer.inputCapacity, alignment: 1)
    private(set) var bufferedInputCount = 0
    private var output: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: RecordMaskingLayer.largestRecord)
    private var started = false
    private var peerHelloSeen = false
    private(set) var peerClosed = false
    private(set) var isClosed = false

    let sendsEarlyData = false
    var negotiatedALPN: String? { "masked" }
    var isResumed: Bool { false }
    var earlyDataAccepted: Bool { false }

    deinit {
        input.deallocate()
    }

    /// A record as it travels: the length, then `payload` masked.
    static func record(_ payload: [UInt8]) -> [UInt8] {
        [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload.map { $0 ^ mask }
    }

    func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        guard Self.inputCapacity - bufferedInputCount >= max(minimum, 1) else { return 0 }
        let written = try body(UnsafeMutableRawBufferPointer(rebasing: input[bufferedInputCount...]))
        bufferedInputCount += written
        return written
    }

    func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents {
        var events: ByteStreamLayerEvents = []
        if !started {
            started = true
            output.append(Self.hello)
        }
        var offset = 0
        defer { consume(offset) }
        if !peerHelloSeen {
            guard bufferedInputCount > 0 else { return events }
            guard input[0] == Self.hello else { throw Failure.badHello(input[0]) }
            offset = 1
            peerHelloSeen = true
            events.insert(.becameReady)
        }
        while !peerClosed, bufferedInputCount - offset >= 2 {
            let length = Int(input[offset]) << 8 | Int(input[offset + 1])
            if length == 0 {
                offset += 2
                peerClosed = true
                events.insert(.peerFinished)
                break
            }
            guard bufferedInputCount - offset - 2 >= length else { break }
            for index in 0..<length { scratch[index] = input[offset + 2 + index] ^ Self.mask }
            scratch.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[..<length])) }
            offset += 2 + length
        }
        return events
    }

    /// Drops the first `count` input bytes, moving the rest to the front.
    private func consume(_ count: Int) {
        guard count > 0 else { return }
        let left = bufferedInputCount - count
        if left > 0 { input.baseAddress!.copyMemory(from: input.baseAddress! + count, byteCount: left) }
        bufferedInputCount = left
    }

    func endOfInput() throws -> Bool {
        guard peerClosed else { throw Failure.truncated }
        return false
    }

    func sendEarly(_ bytes: UnsafeRawBufferPointer) throws -> Int { 0 }

    func send(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        guard peerHelloSeen else { throw Failure.sendBeforeReady }
        guard !isClosed else { throw Failure.sendAfterClose }
        var taken = 0
        while taken < bytes.count, output.count < Self.outputLimit {
            let count = min(Self.largestRecord, bytes.count - taken)
            output += Self.record(Array(bytes[taken..<(taken + count)]))
            taken += count
        }
        return taken
    }

    func seal() throws {}

    var heldByteCount: Int { output.count }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        output += [0, 0]
    }

    var pendingOutputCount: Int { output.count }

    func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        guard !output.isEmpty else { return 0 }
        let written = try output.withUnsafeBytes { try body($0) }
        output.removeFirst(written)
        return written
    }
}
