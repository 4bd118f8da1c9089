import BraidIO
import BraidQUICIO

/// The batching switches of `QUIC.batching(_:)` and `UDP.batching(_:)`.
public typealias BatchingOptions = BraidIO.BatchingOptions

extension NetworkConnection where ApplicationProtocol == QUIC {
    /// Closes the connection with a QUIC application error code and reason the peer sees
    /// (CONNECTION_CLOSE, RFC 9000 §10.2); `cancel()` is the same with code 0. Pending calls
    /// end with `NetworkError.cancelled`.
    ///
    /// ```swift
    /// connection.cancel(applicationErrorCode: 0x101, reason: "shutting down")
    /// ```
    public func cancel(applicationErrorCode code: UInt64, reason: String = "") {
        shared.states.update(.cancelled)
        loop.execute { [core] context in core.value.quic.cancel(context: context, code: code, reason: reason) }
    }

    /// Like `cancel(applicationErrorCode:reason:)`, and returns once the close has been handed
    /// to the socket (see `close()`).
    ///
    /// ```swift
    /// await connection.close(applicationErrorCode: 0x101, reason: "shutting down")
    /// ```
    public func close(applicationErrorCode code: UInt64, reason: String = "") async {
        shared.states.update(.cancelled)
        let core = core
        _ = try? await loop.submit { context in core.value.quic.cancel(context: context, code: code, reason: reason) }
    }

    /// Starts a TLS key update (RFC 9001 §6): both directions move to fresh packet keys while
    /// data keeps flowing. Needs a ready connection whose handshake is confirmed.
    ///
    /// ```swift
    /// try await connection.updateKeys()
    /// ```
    public func updateKeys() async throws {
        let core = core
        try await loop.submit { context in
            do { try core.value.quic.updateKeys(context: context) } catch { throw NetworkError(error) }
        }
    }
}

/// System calls, datagrams, bytes and batching counts of a listener's UDP sockets
/// (`NetworkListener.socketStatistics`): `sendmsgCalls`, `sendmmsgCalls`, `recvmsgCalls`,
/// `recvmmsgCalls`, `syscalls`, `datagramsSent`/`Received`, `bytesSent`/`Received`, GSO and GRO.
public typealias SocketStatistics = BraidIO.SocketCounters
