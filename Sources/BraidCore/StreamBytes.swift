/// Bytes handed to a stream, copied once into memory that never moves: an engine keeps
/// pointers into them until the peer acknowledges them (ngtcp2 does; a Swift array's storage
/// may be copied by the optimizer). Made where the application calls `send`, then passed down
/// as is. Sendable because the bytes are written only by `init` and read-only afterwards.
public final class StreamBytes: @unchecked Sendable {
    package let base: UnsafeMutableRawBufferPointer

    public init<Bytes: Collection>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        base = .allocate(byteCount: bytes.count, alignment: 1)
        let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
            base.copyMemory(from: UnsafeRawBufferPointer(source))
        }
        if copied == nil {
            for (index, byte) in bytes.enumerated() { base[index] = byte }
        }
    }

    public var count: Int { base.count }

    deinit { base.deallocate() }
}
