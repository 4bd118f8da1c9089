extension NWProtocolUDP {
    /// UDP's per-datagram metadata: it has no fields, and marks a content context as a UDP
    /// datagram (a received datagram's context carries one, with its `NWProtocolIP.Metadata`).
    ///
    /// ```swift
    /// let context = NWConnection.ContentContext(identifier: "datagram", metadata: [NWProtocolUDP.Metadata()])
    /// ```
    public final class Metadata: NWProtocolMetadata, @unchecked Sendable {
        /// UDP metadata for a send.
        override public init() {}

        override var definition: NWProtocolDefinition? { NWProtocolUDP.definition }
    }
}
