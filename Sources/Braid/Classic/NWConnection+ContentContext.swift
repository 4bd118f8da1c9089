extension NWConnection {
    /// What a send or a received content is part of: Network.framework's content context.
    /// On a byte stream a final context with `isComplete` ends the stream; a received
    /// content's context is `.finalMessage` once the stream (or datagram) is complete.
    ///
    /// ```swift
    /// connection.send(content: Data("bye".utf8), contentContext: .finalMessage, isComplete: true,
    ///                 completion: .contentProcessed { _ in })
    /// ```
    public final class ContentContext: Sendable {
        /// A name for the content, for the application's own use.
        public let identifier: String
        /// Milliseconds after which unsent content may be dropped (0: never). Braid sends it.
        public let expirationMilliseconds: UInt64
        /// The content's priority against other content of the connection (0 to 1). Braid
        /// sends in order.
        public let relativePriority: Double
        /// Nothing follows this content: with `isComplete`, a byte stream ends after it.
        public let isFinal: Bool
        /// Content that must go before this one. Braid sends in order.
        public let antecedent: ContentContext?
        /// Per-protocol metadata of the content.
        public let protocolMetadata: [NWProtocolMetadata]

        public init(
            identifier: String, expiration: UInt64 = 0, priority: Double = 0.5, isFinal: Bool = false,
            antecedent: ContentContext? = nil, metadata: [NWProtocolMetadata]? = []
        ) {
            self.identifier = identifier
            expirationMilliseconds = expiration
            relativePriority = priority
            self.isFinal = isFinal
            self.antecedent = antecedent
            protocolMetadata = metadata ?? []
        }

        /// A message that does not end the connection's stream.
        public static let defaultMessage = ContentContext(identifier: "default")
        /// The last message: with `isComplete`, the stream ends after it.
        public static let finalMessage = ContentContext(identifier: "final", isFinal: true)
        /// The whole stream as one content: with `isComplete`, the stream ends after it.
        public static let defaultStream = ContentContext(identifier: "stream", isFinal: true)

        /// This content's metadata of the protocol `definition` names, if it has some: on a
        /// received UDP datagram, `NWProtocolIP.definition` gives its `NWProtocolIP.Metadata`
        /// (the ECN mark it arrived with) and `NWProtocolUDP.definition` its UDP metadata.
        ///
        /// ```swift
        /// connection.receiveMessage { content, context, _, _ in
        ///     let ip = context?.protocolMetadata(definition: NWProtocolIP.definition) as? NWProtocolIP.Metadata
        ///     print(content?.count ?? 0, ip?.ecn == .ce ? "congestion experienced" : "")
        /// }
        /// ```
        public func protocolMetadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? {
            protocolMetadata.first { $0.definition == definition }
        }
    }
}

/// Metadata of one protocol for a content (`NWConnection.ContentContext.protocolMetadata`).
///
/// `@unchecked Sendable`: a class Swift cannot check; subclasses keep their values behind locks.
public class NWProtocolMetadata: @unchecked Sendable {
    init() {}

    /// The protocol this metadata belongs to (nil: none Braid names).
    var definition: NWProtocolDefinition? { nil }
}
