import BraidWebSocket

extension NWProtocolWebSocket {
    /// permessage-deflate (RFC 7692): messages compressed with DEFLATE, negotiated in the
    /// upgrade. Network.framework has no such option; Braid's is off unless set, as with
    /// Apple's WebSocket, because compression costs memory per connection (about 300 KiB with
    /// the default 15-bit windows, less with smaller ones) and mixing secrets with data a peer
    /// chooses in one compressed context can leak them (as CRIME and BREACH did for TLS and
    /// HTTP).
    ///
    /// A client offers these settings; a listener accepts the first offer it can with them and
    /// otherwise runs uncompressed. Each side's `NoContextTakeover` asks that side to compress
    /// every message from an empty window; each `MaximumWindowBits` (8 to 15) bounds a side's
    /// window. A client always offers `client_max_window_bits`, so a listener may bound it; a
    /// listener whose `clientMaximumWindowBits` is below 15 declines offers that do not. A
    /// received message's inflated size is what `maximumMessageSize` bounds: one that inflates
    /// past it fails with close code 1009 at that byte. Control messages are never compressed.
    ///
    /// ```swift
    /// var deflate = NWProtocolWebSocket.PerMessageDeflate()
    /// deflate.clientNoContextTakeover = true
    /// let stack = WebSocket { TLS() }.perMessageDeflate(deflate)
    /// ```
    public struct PerMessageDeflate: Sendable, Hashable {
        /// The server compresses each message from an empty window (default false).
        public var serverNoContextTakeover = false
        /// The client compresses each message from an empty window (default false).
        public var clientNoContextTakeover = false
        /// The largest window the server compresses with, as a power of two, 8 to 15
        /// (default 15: 32 KiB).
        public var serverMaximumWindowBits = 15
        /// The largest window the client compresses with, 8 to 15 (default 15).
        public var clientMaximumWindowBits = 15
        /// zlib's compression level for what this end sends, 0 (none) to 9 (smallest);
        /// default 6. With an 8-bit window, which zlib cannot compress with, messages go as
        /// stored blocks (valid permessage-deflate, not smaller).
        public var compressionLevel = 6

        /// permessage-deflate with context takeover and 15-bit windows both ways.
        public init() {}

        /// The engine's settings, clamped to what RFC 7692 and zlib allow.
        var settings: WebSocketDeflateNegotiation.Settings {
            var settings = WebSocketDeflateNegotiation.Settings()
            settings.serverNoContextTakeover = serverNoContextTakeover
            settings.clientNoContextTakeover = clientNoContextTakeover
            settings.serverMaxWindowBits = min(max(serverMaximumWindowBits, 8), 15)
            settings.clientMaxWindowBits = min(max(clientMaximumWindowBits, 8), 15)
            settings.compressionLevel = min(max(compressionLevel, 0), 9)
            return settings
        }
    }
}
