import BraidPerf
import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// A custom framer over UDP, against a plain UDP peer (Python's `socket`, see
/// `Tests/Interop/peers/framed_udp_peer.py`): each datagram is the framer's whole input (a
/// datagram it rejects is dropped, a message cut short by its datagram's end does not take the
/// next datagram's bytes, two messages in one datagram are two messages), and each message
/// sent goes out as one datagram. In both dialects.
@Suite(.serialized, .timeLimit(.minutes(5))) struct FramerOverUDPTests {
    static let expected: [(type: UInt32, content: String)] = [(1, "one"), (2, "two"), (3, "three"), (4, "four")]

    @Test func aFramerOverUDPParsesEachDatagramAloneAndSendsEachMessageAsOneDatagram() async throws {
        DatagramTestFramer.reset()
        let peer = try Self.startPeer()
        let port = try await peer.listeningPort()
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) {
            Framer<DatagramTestFramer> { UDP() }
        }
        defer { connection.cancel() }
        try await connection.send(Data("hello".utf8), metadata: DatagramTestFramer.message(type: 9))
        let received = try await withDeadline(.seconds(60)) {
            var received: [(type: UInt32, content: String)] = []
            for _ in Self.expected {
                let (content, metadata) = try await connection.receive()
                received.append((metadata.framer["type"] as? UInt32 ?? 0, String(decoding: content, as: UTF8.self)))
            }
            return received
        }
        let messages = try #require(received, "the framer delivered fewer than \(Self.expected.count) messages in time")
        #expect(messages.map(\.type) == Self.expected.map(\.type))
        #expect(messages.map(\.content) == Self.expected.map(\.content))
        #expect(DatagramTestFramer.rejected.withLock { $0 } == 1, "the framer saw \(DatagramTestFramer.rejected.withLock { $0 }) datagrams without its mark")

        try await connection.send(Data("ab".utf8), metadata: DatagramTestFramer.message(type: 5))
        try await connection.send(Data("cd".utf8), metadata: DatagramTestFramer.message(type: 6))
        try Self.checkPeer(peer, exit: try await peer.finish(within: 90))
    }

    /// The classic dialect: `NWParameters.udp` with the framer's options first in
    /// `applicationProtocols`, the framer's message in each content context.
    @Test func aClassicFramerOverUDPKeepsDatagramBoundaries() async throws {
        DatagramTestFramer.reset()
        let peer = try Self.startPeer()
        let port = try await peer.listeningPort()
        let parameters = NWParameters.udp
        parameters.defaultProtocolStack.applicationProtocols.insert(NWProtocolFramer.Options(definition: DatagramTestFramer.definition), at: 0)
        let connection = NWConnection(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!, using: parameters)
        connection.start(queue: DispatchQueue(label: "framer-over-udp"))
        defer { connection.cancel() }
        let hello = NWConnection.ContentContext(identifier: "hello", metadata: [DatagramTestFramer.message(type: 9)])
        #expect(await connection.sendAsync(Data("hello".utf8), context: hello) == nil)
        for (type, content) in Self.expected {
            let (received, context, error) = await connection.receiveMessageWithContext()
            #expect(error == nil)
            let message = context?.protocolMetadata(definition: DatagramTestFramer.definition) as? NWProtocolFramer.Message
            #expect(message?["type"] as? UInt32 == type)
            #expect(received.map { String(decoding: $0, as: UTF8.self) } == content)
        }
        for (type, content) in [(UInt32(5), "ab"), (6, "cd")] {
            let context = NWConnection.ContentContext(identifier: content, metadata: [DatagramTestFramer.message(type: type)])
            #expect(await connection.sendAsync(Data(content.utf8), context: context) == nil)
        }
        try Self.checkPeer(peer, exit: try await peer.finish(within: 90))
    }

    /// A listener of the framer over UDP, a plain `UDP()` client: the listener's connection
    /// gets each framed message the client sends (two in one datagram too) and echoes each
    /// with its type, one datagram each; a datagram without the mark is dropped.
    @Test func aFramerOverUDPListenerEchoesEachMessageAsOneDatagram() async throws {
        DatagramTestFramer.reset()
        let server = try await RunningFramedListener.start(Framer<DatagramTestFramer> { UDP() }) { connection in
            while true {
                let (content, metadata) = try await connection.receive()
                try await connection.send(content, metadata: metadata.framer)
            }
        }
        defer { server.task.cancel() }
        let client = NetworkConnection(to: server.endpoint) { UDP() }
        defer { client.cancel() }
        let framed = { (type: UInt8, content: String) in Data([0xF7, type, 0, UInt8(content.utf8.count)]) + Data(content.utf8) }
        try await client.send(framed(1, "one"))
        try await client.send(Data("no mark".utf8))
        try await client.send(framed(2, "two") + framed(3, "three"))
        let echoed = try await withDeadline(.seconds(60)) {
            var echoed: [Data] = []
            while echoed.count < 3 { echoed.append(try await client.receive().content) }
            return echoed
        }
        #expect(echoed == [framed(1, "one"), framed(2, "two"), framed(3, "three")])
        #expect(DatagramTestFramer.rejected.withLock { $0 } == 1)
    }

    /// A framer with a handshake of its own over UDP (`.willMarkReady`): it sends "hi" when it
    /// starts, and marks the connection ready when the peer's "ok" datagram comes; only then
    /// do the application's messages go out.
    @Test func aFramerOverUDPCompletesAHandshakeOfItsOwnBeforeReady() async throws {
        let server = try await RunningFramedListener.start(UDP()) { connection in
            let (greeting, _) = try await connection.receive()
            guard greeting == Data("hi".utf8) else { return }
            try await connection.send(Data("ok".utf8))
            while true {
                let (content, _) = try await connection.receive()
                try await connection.send(content)
            }
        }
        defer { server.task.cancel() }
        let client = NetworkConnection(to: server.endpoint) { Framer<GreetingDatagramFramer> { UDP() } }
        defer { client.cancel() }
        let echoed = try await withDeadline(.seconds(60)) {
            try await client.send(Data([0xF7, 1, 0, 5]) + Data("after".utf8), metadata: DatagramTestFramer.message(type: 1))
            return try await client.receive().content
        }
        #expect(echoed == Data([0xF7, 1, 0, 5]) + Data("after".utf8))
    }

    static func startPeer() throws -> ChildProcess {
        let python = try TLSPeerTools.find("python3", package: "python3")
        let script = PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/framed_udp_peer.py").path
        return try ChildProcess(python, [script, "server", "--expect", "2", "--timeout", "60"])
    }

    /// The peer got the greeting, then "ab" and "cd" as one datagram each, framed.
    static func checkPeer(_ peer: ChildProcess, exit: ChildProcess.Exit) throws {
        let report = peer.jsonLines.last ?? [:]
        #expect(exit.status == 0 && report["ok"] as? Bool == true, "the peer: \(peer.output) \(peer.errors)")
        #expect(report["greeting"] as? String == "f7090005" + Data("hello".utf8).hex)
        #expect(report["datagrams"] as? [String] == ["f7050002" + Data("ab".utf8).hex, "f7060002" + Data("cd".utf8).hex])
    }
}

extension Data {
    fileprivate var hex: String { map { String(format: "%02x", $0) }.joined() }
}

/// A message is 0xF7, its type (one byte, the message's "type"), its length (two bytes), then
/// its content. A datagram without the 0xF7 mark is rejected: consumed whole, nothing
/// delivered.
final class DatagramTestFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: DatagramTestFramer.self)
    static var label: String { "DatagramTest" }
    /// Datagrams rejected so far.
    static let rejected = Locked(0)

    static func reset() {
        rejected.withLock { $0 = 0 }
    }

    static func message(type: UInt32) -> NWProtocolFramer.Message {
        let message = NWProtocolFramer.Message(definition: definition)
        message["type"] = type
        return message
    }

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var header: (type: UInt8, length: Int)?
            var marked = true
            _ = framer.parseInput(minimumIncompleteLength: 4, maximumLength: 4) { buffer, _ in
                guard let buffer, buffer.count == 4 else { return 0 }
                guard buffer[0] == 0xF7 else {
                    marked = false
                    return 0
                }
                header = (buffer[1], Int(buffer[2]) << 8 | Int(buffer[3]))
                return 4
            }
            if !marked {
                Self.rejected.withLock { $0 += 1 }
                _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 65536) { buffer, _ in buffer?.count ?? 0 }
                return 0
            }
            guard let header else { return 4 }
            let message = NWProtocolFramer.Message(instance: framer)
            message["type"] = UInt32(header.type)
            if !framer.deliverInputNoCopy(length: header.length, message: message, isComplete: true) { return 0 }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        let type = UInt8(truncatingIfNeeded: message["type"] as? UInt32 ?? 0)
        framer.writeOutput(data: [0xF7, type, UInt8(messageLength >> 8), UInt8(messageLength & 0xFF)])
        try? framer.writeOutputNoCopy(length: messageLength)
    }
}

/// Sends "hi" when it starts and is ready once the peer answers "ok"; after that, each datagram
/// is one message as it is, and each message goes out as it is.
final class GreetingDatagramFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: GreetingDatagramFramer.self)
    static var label: String { "GreetingDatagram" }
    private var greeted = false

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult {
        framer.writeOutput(data: Data("hi".utf8))
        return .willMarkReady
    }

    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        var datagram = Data()
        _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 65536) { buffer, _ in
            datagram = buffer.map { Data($0) } ?? Data()
            return datagram.count
        }
        if !greeted {
            if datagram == Data("ok".utf8) {
                greeted = true
                framer.markReady()
            }
            return 0
        }
        if !datagram.isEmpty {
            framer.deliverInput(data: datagram, message: NWProtocolFramer.Message(instance: framer), isComplete: true)
        }
        return 0
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        try? framer.writeOutputNoCopy(length: messageLength)
    }
}
