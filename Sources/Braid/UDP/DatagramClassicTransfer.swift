import BraidIO
import Foundation
import Synchronization

/// The classic API's view of a UDP connection (or of a DTLS one, whose messages are
/// datagrams too): one datagram per send and per receive. A plain receive skips the receipt's
/// metadata.
final class DatagramClassicTransfer<Stack: NetworkProtocol>: MessageClassicTransfer {
    let connection: NetworkConnection<Stack>

    init(_ connection: NetworkConnection<Stack>) { self.connection = connection }

    /// A datagram with an ECN mark goes through the connection's loop, which keeps the mark.
    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        // A send without content only marks an end, which UDP does not carry.
        guard let content else { return .done }
        guard !content.isEmpty else { return .failed(NWError(.unsupported("empty UDP datagrams"))) }
        do {
            let ecn = try IPSendMarks(options.metadata, connectionServiceClass: connection.parameters.serviceClass).ecn
            if ecn == .notECT, try connection.offerDatagram(content) == nil { return .done }
            let connection = connection
            return .wait { try await connection.sendDatagram(content, ecn: ecn) }
        } catch {
            return .failed(NWError(NetworkError(error)))
        }
    }

    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) {
        try await receiveMessage()
    }

    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) {
        (try await connection.receiveDatagram().content, true)
    }

    /// The datagram with its IP metadata (the ECN mark it arrived with) and UDP's.
    func receiveMessageWithMetadata() async throws -> ClassicReceipt {
        let (content, metadata) = try await connection.receiveDatagram()
        return ClassicReceipt(
            content: content, isComplete: true, metadata: [NWProtocolIP.Metadata(received: metadata.ecn), NWProtocolUDP.Metadata()])
    }

    func batch(_ body: () -> Void) {
        let part = connection.shared.datagram
        part?.batchDepth.add(1, ordering: .acquiringAndReleasing)
        body()
        if part?.batchDepth.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { connection.postDatagramDrain() }
    }

    /// A DTLS connection's TLS metadata (`NWProtocolTLS.definition`, as on Apple's
    /// platforms), once ready, with the version `.DTLSv12` (the only one Braid's DTLS speaks);
    /// UDP has none of its own.
    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? {
        guard definition == NWProtocolTLS.definition, Stack.self == DTLS.self else { return nil }
        let (alpn, security) = connection.shared.snapshot.withLock { ($0.negotiatedALPN, $0.security) }
        return NWProtocolTLS.Metadata(
            negotiatedProtocol: alpn, serverName: security?.serverName, negotiatedVersion: .DTLSv12,
            peerCertificates: security?.peerCertificates ?? [])
    }
}

extension UDP: ClassicBinding {
    static func transfer(over connection: NetworkConnection<UDP>) -> any ClassicTransfer { DatagramClassicTransfer(connection) }
}
