import Logging

/// Who a connection is in the logs, whatever its stack: a process-wide number (`C1`, `C2`,
/// ... as Network.framework names connections in its logs), the stack and the role. Every line
/// a connection logs carries these as swift-log metadata, so one connection's lines can be
/// picked out of a busy server's log (QUIC's lines also carry `quic.cid`).
package struct ConnectionLogIdentity: Sendable, Equatable {
    /// The metadata keys: `connection.id`, `connection.stack`, `connection.role`.
    package static let idKey = "connection.id"
    package static let stackKey = "connection.stack"
    package static let roleKey = "connection.role"
    package static let keys = [idKey, stackKey, roleKey]

    package let id: String
    package let stack: String
    package let role: String

    private static let counter = Locked<UInt64>(0)

    /// The next connection's identity.
    package static func next(stack: String, role: String) -> ConnectionLogIdentity {
        let number = counter.withLock { value -> UInt64 in
            value &+= 1
            return value
        }
        return ConnectionLogIdentity(id: "C\(number)", stack: stack, role: role)
    }

    package init(id: String, stack: String, role: String) {
        self.id = id
        self.stack = stack
        self.role = role
    }

    package var metadata: Logger.Metadata {
        [Self.idKey: .string(id), Self.stackKey: .string(stack), Self.roleKey: .string(role)]
    }

    /// Puts the identity into `logger`'s metadata.
    package func tag(_ logger: inout Logger) {
        for (key, value) in metadata { logger[metadataKey: key] = value }
    }

    /// The identity `logger` carries, if any.
    package init?(of logger: Logger) {
        guard case .string(let id)? = logger[metadataKey: Self.idKey],
            case .string(let stack)? = logger[metadataKey: Self.stackKey],
            case .string(let role)? = logger[metadataKey: Self.roleKey]
        else { return nil }
        self.init(id: id, stack: stack, role: role)
    }
}
