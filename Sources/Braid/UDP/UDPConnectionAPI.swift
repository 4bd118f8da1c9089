import BraidIO
import Foundation
import Synchronization

extension UDP {
    /// What came with one received datagram.
    public struct Metadata: Sendable, Hashable {
        /// The datagram's ECN mark (RFC 3168): `.notECT` unless the sender or a router set one.
        public var ecn: ECN
        /// Where the datagram came from (the peer's address and port, as IP literals).
        public var remoteEndpoint: NWEndpoint {
            get { endpoints.remote }
            set { endpoints = MetadataEndpoints(remote: newValue, local: endpoints.local) }
        }
        /// Where it arrived: our address and port.
        public var localEndpoint: NWEndpoint {
            get { endpoints.local }
            set { endpoints = MetadataEndpoints(remote: endpoints.remote, local: newValue) }
        }
        /// Both endpoints in one shared box: every datagram between the same two addresses
        /// carries the same one, so handing a datagram's metadata out costs one reference count
        /// instead of a copy of each endpoint.
        private var endpoints: MetadataEndpoints

        init(ecn: ECN, endpoints: MetadataEndpoints) {
            self.ecn = ecn
            self.endpoints = endpoints
        }

        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.ecn == rhs.ecn
                && (lhs.endpoints === rhs.endpoints
                    || (lhs.endpoints.remote == rhs.endpoints.remote && lhs.endpoints.local == rhs.endpoints.local))
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(ecn)
            hasher.combine(endpoints.remote)
            hasher.combine(endpoints.local)
        }
    }

    /// A received datagram's two endpoints (`Metadata`'s storage), never changed once made.
    final class MetadataEndpoints: Sendable {
        let remote: NWEndpoint
        let local: NWEndpoint

        init(remote: NWEndpoint, local: NWEndpoint) {
            self.remote = remote
            self.local = local
        }
    }
}

extension NetworkConnection where ApplicationProtocol == UDP {
    /// Sends `content` as one UDP datagram. Starts the connection if needed (a UDP connection
    /// is ready as soon as it has a socket toward the peer: there is no handshake).
    ///
    /// Returns once the datagram is queued: a burst of sends, from one task or several, goes
    /// out in one pass of the connection's event loop, as one `sendmmsg` or GSO write (use
    /// `batch` to make sure). Waits only while 256 datagrams are already queued. UDP does not
    /// say whether the datagram arrived. Throws `NetworkError.datagramTooLarge` for more than
    /// UDP carries (65,507 bytes over IPv4, 65,527 over IPv6; larger than the path's MTU is
    /// fine: IP fragments it), and `unsupported` for an empty datagram.
    ///
    /// ```swift
    /// try await game.send(Data("player_position:100,50".utf8))
    /// ```
    public func send<Content: Collection & Sendable>(_ content: Content) async throws where Content.Element == UInt8 {
        try await sendDatagram(Data(content))
    }

    /// `send(_:)` for a `Data`: the datagram is queued as it is, not copied (the generic form
    /// copies its bytes into a new `Data`: a malloc and a copy per datagram).
    public func send(_ content: Data) async throws {
        // Queued at once in the usual case, without the further async call (a task frame and
        // an executor check per datagram).
        if try queuedDatagramAtOnce(content) { return }
        try await sendDatagram(content)
    }

    /// Sends `content` as one UDP datagram with per-message metadata, as Network.framework's
    /// `send(_:metadata:)`: an `NWProtocolIP.Metadata`'s ECN mark (RFC 3168) travels in the
    /// datagram's IP header, and the peer reads it in `receive()`'s `metadata.ecn`. A marked
    /// datagram takes one pass of the connection's loop (unmarked ones share passes, see
    /// `send(_:)`). A service class other than the connection's throws
    /// `NetworkError.unsupported` (Linux marks per socket: set the parameters' `serviceClass`).
    ///
    /// ```swift
    /// try await game.send(Data("probe".utf8)) { NWProtocolIP.Metadata().ecn(.ect1) }
    /// ```
    public func send<Content: Collection & Sendable>(
        _ content: Content, @ProtocolMetadataBuilder metadata builder: () -> [NWProtocolMetadata]
    ) async throws where Content.Element == UInt8 {
        let marks = try IPSendMarks(builder(), connectionServiceClass: parameters.serviceClass)
        try await sendDatagram(content as? Data ?? Data(content), ecn: marks.ecn)
    }

    /// Runs `body` and sends the datagrams it sends (from any task) together when it returns:
    /// one pass of the event loop writes them all, as one GSO write when they have one size
    /// (up to 64 of at most 1,452 bytes) and with `sendmmsg` otherwise. Network.framework's
    /// `batch`. Sends inside return as soon as they are queued; blocks may nest.
    ///
    /// ```swift
    /// try await game.batch {
    ///     for update in updates { try await game.send(update) }
    /// }
    /// ```
    public func batch<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await holdingDatagramDrain(body)
    }

    /// The next datagram, whole, with its metadata (ECN mark, where it came from). Starts the
    /// connection if needed. Concurrent receives each get a different datagram. Unread
    /// datagrams beyond 4,096 are dropped, oldest first. Throws the connection's error once it
    /// has ended and every datagram was read (`NetworkError.cancelled` after `cancel()`).
    ///
    /// ```swift
    /// let (data, _) = try await game.receive()
    /// ```
    public func receive() async throws -> (content: Data, metadata: UDP.Metadata) {
        try await receiveDatagram()
    }

    /// Every datagram received, in arrival order, until the connection is cancelled (the
    /// iteration ends) or fails (it throws).
    ///
    /// ```swift
    /// for try await (content, metadata) in game.messages {
    ///     print("\(content.count) bytes from \(metadata.remoteEndpoint)")
    /// }
    /// ```
    public var messages: NetworkMessages<(content: Data, metadata: UDP.Metadata)> {
        NetworkMessages(makingSource: { [self] in datagramSource() })
    }

    /// The system calls, datagrams and bytes of the connection's socket so far (a listener's
    /// connection: of the listener's socket, which its peers share); nil before the connection
    /// has a socket.
    ///
    /// ```swift
    /// if let sockets = await game.socketStatistics { print(sockets.sendmmsgCalls) }
    /// ```
    public var socketStatistics: SocketStatistics? {
        get async {
            let core = core
            return try? await loop.submit { _ in core.value.datagram.socketCounters }
        }
    }
}

extension NetworkConnection where ApplicationProtocol == UDP {
    /// Braid: datagrams from the peer this connection dropped so far because the application
    /// did not read them: beyond 4,096 unread, or beyond 8 MiB of unread payload (the oldest
    /// go). UDP does not recover them; a count that grows says the application reads too
    /// slowly.
    ///
    /// ```swift
    /// if await game.droppedDatagramCount > 0 { print("reading too slowly") }
    /// ```
    public var droppedDatagramCount: Int {
        get async {
            let core = core
            return (try? await loop.submit { _ in core.value.datagram.droppedDatagrams }) ?? 0
        }
    }
}
