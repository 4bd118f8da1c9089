/// Builds the per-message metadata of a send, as in Network.framework's
/// `send(_:metadata:)`: each line is one protocol's metadata (`NWProtocolIP.Metadata`, ...).
///
/// ```swift
/// try await connection.send(Data("ping".utf8)) { NWProtocolIP.Metadata().ecn(.ect0) }
/// ```
@resultBuilder
public enum ProtocolMetadataBuilder {
    /// The metadata, in the order written.
    public static func buildBlock(_ components: [NWProtocolMetadata]...) -> [NWProtocolMetadata] { components.flatMap { $0 } }
    /// Metadata given only when a condition holds.
    public static func buildOptional(_ metadata: [NWProtocolMetadata]?) -> [NWProtocolMetadata] { metadata ?? [] }
    /// Metadata of either branch.
    public static func buildEither(first metadata: [NWProtocolMetadata]) -> [NWProtocolMetadata] { metadata }
    /// Metadata of either branch.
    public static func buildEither(second metadata: [NWProtocolMetadata]) -> [NWProtocolMetadata] { metadata }
    /// One protocol's metadata as written.
    public static func buildExpression(_ metadata: NWProtocolMetadata) -> [NWProtocolMetadata] { [metadata] }
}
