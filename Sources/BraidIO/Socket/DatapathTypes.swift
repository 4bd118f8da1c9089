@_exported import BraidCore

#if canImport(Glibc)
import Glibc
#endif

/// The addresses and ECN mark of a datagram, or of a batch of datagrams that share them: what
/// a socket reports for each datagram it receives and takes with each batch it sends.
/// The datapath's own vocabulary: a stack's driver converts to its engine's types.
public struct DatagramMetadata: Sendable, Hashable {
    /// The peer: where a received datagram came from, or where a sent one goes.
    public var remote: SocketAddress
    /// Ours: the address a datagram arrived at, or leaves from. On a wildcard-bound socket it
    /// is the packet's own destination (IP_PKTINFO), so an answer leaves from the address the
    /// peer used; on a socket bound to one address it is that address.
    public var local: SocketAddress
    public var ecn: ECN

    public init(remote: SocketAddress, local: SocketAddress, ecn: ECN = .notECT) {
        self.remote = remote
        self.local = local
        self.ecn = ecn
    }
}

/// A socket-level failure, with the call that failed and the system's reason.
public enum DatapathError: Error, Equatable, CustomStringConvertible {
    /// A system call failed: the call and errno.
    case system(String, Int32)
    /// A loop operation did not finish in time.
    case timedOut(Duration)

    public var description: String {
        switch self {
        case .system(let call, let code):
            let hint: String
            switch code {
            case EADDRINUSE: hint = " (another socket holds this address and port; pick another port or stop the other process)"
            case EACCES, EPERM: hint = " (not permitted; ports below 1024 need privileges)"
            case EADDRNOTAVAIL: hint = " (this machine has no such local address)"
            default: hint = ""
            }
            return "\(call) failed: \(String(cString: strerror(code)))\(hint)"
        case .timedOut(let limit):
            return "did not finish within \(limit)"
        }
    }
}

/// Which batching features a socket may use. Each can be turned off to compare costs; a
/// feature the kernel lacks is off whatever is asked.
///
/// ```swift
/// var batching = BatchingOptions.all
/// batching.segmentationOffload = false   // one datagram per message, still sendmmsg
/// ```
public struct BatchingOptions: Sendable, Hashable, CustomStringConvertible {
    /// UDP_SEGMENT (GSO): one send hands the kernel up to 64 datagrams.
    public var segmentationOffload: Bool
    /// UDP_GRO: one receive may return several coalesced datagrams.
    public var receiveOffload: Bool
    /// sendmmsg/recvmmsg: several messages per system call.
    public var multiMessage: Bool

    public init(segmentationOffload: Bool = true, receiveOffload: Bool = true, multiMessage: Bool = true) {
        self.segmentationOffload = segmentationOffload
        self.receiveOffload = receiveOffload
        self.multiMessage = multiMessage
    }

    public static let all = BatchingOptions()
    public static let none = BatchingOptions(segmentationOffload: false, receiveOffload: false, multiMessage: false)

    public var description: String {
        "gso=\(segmentationOffload ? "on" : "off") gro=\(receiveOffload ? "on" : "off") mmsg=\(multiMessage ? "on" : "off")"
    }
}
