extension UnsafeMutableRawBufferPointer {
    /// Copies `content` to the start of this buffer, which has room for all of it: one
    /// `memcpy` for contiguous storage (`Data`, arrays), byte by byte otherwise.
    // Inlinable: specialized in the caller for its collection type, as a small send copies
    // through it on the caller's thread.
    @inlinable
    package func copyCollection(_ content: some Collection<UInt8>) {
        let copied: Void? = content.withContiguousStorageIfAvailable { copyMemory(from: UnsafeRawBufferPointer($0)) }
        if copied == nil {
            for (index, byte) in content.enumerated() { self[index] = byte }
        }
    }
}
