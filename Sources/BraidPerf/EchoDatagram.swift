import Foundation

/// The datagrams `braid client` sends to the echo application, and its reading of the echoes:
/// a sequence number (UInt32, big-endian), then pattern bytes (`PerfPattern`) from the
/// number's offset, so an echo that comes back corrupted, cut, or not one of ours is told
/// apart. Echoes are what the peer sends: `number(ofEcho:size:count:)` takes any bytes.
///
/// ```swift
/// let datagram = EchoDatagram.make(number: 7, size: 100)
/// let number = EchoDatagram.number(ofEcho: datagram, size: 100, count: 10)  // 7
/// ```
package enum EchoDatagram {
    /// The sequence number's bytes: the smallest datagram.
    package static let headerSize = 4

    /// Datagram `number` (below 2^32) of `size` bytes (at least `headerSize`).
    package static func make(number: Int, size: Int) -> Data {
        precondition(size >= headerSize && number >= 0 && number <= Int(UInt32.max), "an echo datagram holds its 4-byte number")
        var bytes = Data(count: size)
        bytes.withUnsafeMutableBytes { buffer in
            buffer.storeBytes(of: UInt32(number).bigEndian, as: UInt32.self)
            PerfPattern.slice(at: number, count: size - headerSize).withUnsafeBytes { pattern in
                UnsafeMutableRawBufferPointer(rebasing: buffer[headerSize...]).copyMemory(from: pattern)
            }
        }
        return bytes
    }

    /// The number of an echo that is intact datagram number 0..<`count` of `size` bytes; nil
    /// for anything else.
    package static func number(ofEcho echo: Data, size: Int, count: Int) -> Int? {
        guard echo.count == size, size >= headerSize else { return nil }
        let number = echo.prefix(headerSize).reduce(0) { $0 << 8 | Int($1) }
        guard number < count, PerfPattern.matches(echo.dropFirst(headerSize), at: number) else { return nil }
        return number
    }
}
