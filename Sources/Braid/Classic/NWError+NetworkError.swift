import BraidTLS
import Foundation

extension NWError {
    /// The classic API's form of a Braid failure.
    init(_ error: NetworkError) {
        switch error {
        case .dnsNameNotFound: self = .dns(Self.noSuchRecord)
        case .dnsFailure: self = .dns(Self.unknownDNSFailure)
        case .noResponse, .idleTimeout: self = .posix(.ETIMEDOUT)
        case .certificateRejected(let problem):
            switch problem {
            case .untrusted: self = .tls(-9812)
            case .nameMismatch: self = .tls(-9843)
            case .expired: self = .tls(-9814)
            case .invalid, .pinMismatch, .missing, .rejected: self = .tls(-9808)
            }
        case .handshakeRejectedByPeer(let alert): self = .tls(Self.status(ofAlert: alert))
        case .alpnMismatch: self = .tls(-9858)
        case .tlsFailure: self = .tls(-9800)
        case .truncated: self = .tls(-9816)
        case .connectionRefused, .serverBusy: self = .posix(.ECONNREFUSED)
        case .connectionReset, .peerReset, .streamReset: self = .posix(.ECONNRESET)
        case .peerClosed: self = .posix(.ECONNABORTED)
        case .protocolError, .http3ProtocolError, .webSocketHandshakeFailed, .webSocketProtocolError: self = .posix(.EPROTO)
        case .streamStopped, .streamNotWritable: self = .posix(.EPIPE)
        case .streamNotReadable: self = .posix(.EBADF)
        case .unexpectedEndOfStream: self = .posix(.ENODATA)
        case .cancelled: self = .posix(.ECANCELED)
        case .datagramsNotSupported, .unsupported: self = .posix(.EOPNOTSUPP)
        case .datagramTooLarge, .messageTooLarge, .responseTooLarge: self = .posix(.EMSGSIZE)
        case .invalidConfiguration, .invalidState, .messageEncodingFailed, .messageTypeOutOfRange: self = .posix(.EINVAL)
        case .messageDecodingFailed: self = .posix(.EBADMSG)
        case .noAllowedInterface: self = .posix(.ENETDOWN)
        case .system(_, let code): self = .posix(POSIXErrorCode(rawValue: code) ?? .EIO)
        case .internalError: self = .posix(.EIO)
        }
    }

    /// The Security framework's status for a TLS alert the peer sent.
    private static func status(ofAlert alert: UInt8) -> OSStatus {
        switch alert {
        case 40: -9824
        case 42: -9825
        case 43: -9826
        case 44: -9827
        case 45: -9828
        case 46: -9829
        case 48: -9831
        case 70: -9836
        case 112: -9865
        case 116: -9863
        default: -9802
        }
    }
}
