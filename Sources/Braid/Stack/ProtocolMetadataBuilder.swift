/// Builds the metadata a send carries, as Network.framework's `ProtocolMetadataBuilder`:
/// `send(data) { NWProtocolWebSocket.Metadata(opcode: .ping) }`.
@resultBuilder
public enum ProtocolMetadataBuilder {
    /// The metadata, in order.
    public static func buildBlock(_ components: NWProtocolMetadata...) -> [NWProtocolMetadata] { components }
}
