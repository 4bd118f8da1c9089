/// What one connection carried, as its channel counted it: handed once, when the channel lets
/// its transport go, to whoever asked for it (`ConnectionChannel.trafficObserver`). The channels
/// count as they already do for their statistics (plain integers on the loop); nothing is
/// read or reported while the connection runs, so asking costs nothing per packet.
package struct ConnectionTraffic: Sendable, Hashable {
    /// Payload bytes written to and read from the socket (QUIC: UDP payloads, after
    /// encryption; TLS: records; TCP: stream bytes; UDP: datagram payloads).
    package var bytesSent: UInt64 = 0
    package var bytesReceived: UInt64 = 0
    /// Packets each way: QUIC's and UDP's datagrams; TCP's segments (TCP_INFO).
    package var packetsSent: UInt64 = 0
    package var packetsReceived: UInt64 = 0
    /// TCP's retransmitted segments (TCP_INFO).
    package var retransmittedSegments: UInt64 = 0
    /// QUIC's probe timeouts (each sends probe packets that carry unacknowledged data again):
    /// counted apart from TCP's segments, since one timeout is not one packet.
    package var probeTimeouts: UInt64 = 0
    /// QUIC's RFC 9221 datagrams declared lost (or dropped unsent); UDP has no such notion.
    package var datagramsLost: UInt64 = 0

    package init() {}
}
