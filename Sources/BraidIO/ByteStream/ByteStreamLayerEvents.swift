/// What one `ByteStreamLayer.process(deliver:)` pass found besides bytes: a set, so a pass
/// reports its events without allocating.
package struct ByteStreamLayerEvents: OptionSet, Sendable {
    package let rawValue: UInt8

    package init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// The layer became ready (its handshake completed): it takes sends, and its facts are
    /// final. Reported once.
    package static let becameReady = ByteStreamLayerEvents(rawValue: 1 << 0)
    /// The peer ended the layer's stream cleanly (close_notify): nothing more comes for above.
    package static let peerFinished = ByteStreamLayerEvents(rawValue: 1 << 1)
    /// The layer waits on a decision made off the loop (an application's verdict on the peer's
    /// certificate) and takes no input until then: the channel stops reading until the layer
    /// asks for another pass (`ByteStreamLayer.requestProcessing`).
    package static let awaitingDecision = ByteStreamLayerEvents(rawValue: 1 << 2)
}
