import BraidTLS
import BraidIO
import Foundation

/// The classic API's view of a TLS or TCP connection: its byte stream.
final class StreamClassicTransfer<Stack: StreamProtocol & StackBinding>: ConnectionClassicTransfer {
    let connection: NetworkConnection<Stack>

    init(_ connection: NetworkConnection<Stack>) { self.connection = connection }

    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt {
        let content = content ?? Data()
        do {
            guard let storage = try connection.queueAtOnce(content, endOfStream: isFinal) else { return .done }
            let connection = connection
            return .wait {
                try await connection.byteStream.sendWaiting(storage, endOfStream: isFinal, idempotent: false, queued: connection.start)
            }
        } catch {
            return .failed(NWError(NetworkError(error)))
        }
    }

    /// An idempotent send is queued as the new API's `sendIdempotent` queues it, without
    /// starting the connection: sent before `start(queue:)`, it is in the outbox when the
    /// connection starts, so a resumed TLS connection sends it as early data.
    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        guard options.idempotent else { return send(content, isFinal: options.isFinal) }
        let bytes = StreamBytes(copying: content ?? Data())
        let isFinal = options.isFinal
        do {
            let end = try connection.byteStream
            if try end.queueAtOnce(bytes, endOfStream: isFinal, idempotent: true, queued: {}) { return .done }
            let connection = connection
            return .wait { try await end.sendWaiting(bytes, endOfStream: isFinal, idempotent: true, queued: connection.start) }
        } catch {
            return .failed(NWError(NetworkError(error)))
        }
    }

    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) {
        connection.start()
        let delivery = try await connection.byteStream.receive(minimum: minimum, maximum: max(minimum, maximum), exact: false)
        return (delivery.content.isEmpty && delivery.endOfStream ? nil : delivery.content, delivery.endOfStream)
    }

    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) {
        try await gatherUntilEnd()
    }

    func batch(_ body: () -> Void) { body() }

    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? {
        // TLS's metadata on a TLS connection; TCP has none of its own yet.
        guard definition == NWProtocolTLS.definition, Stack.self == TLS.self else { return nil }
        let (alpn, security) = connection.shared.snapshot.withLock { ($0.negotiatedALPN, $0.security) }
        return NWProtocolTLS.Metadata(
            negotiatedProtocol: alpn, serverName: security?.serverName,
            negotiatedVersion: security?.version.flatMap { TLSVersion(rawValue: $0) }.map(TLSProtocolVersion.init),
            peerCertificates: security?.peerCertificates ?? [])
    }
}

extension TCP: ClassicBinding {
    static func transfer(over connection: NetworkConnection<TCP>) -> any ClassicTransfer { StreamClassicTransfer(connection) }
}

extension TLS: ClassicBinding {
    static func transfer(over connection: NetworkConnection<TLS>) -> any ClassicTransfer { StreamClassicTransfer(connection) }
}
