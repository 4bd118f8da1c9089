import Foundation

import Braid

/// A test framer in the shape of Apple's TicTacToe sample framer (a header of type and
/// length, both UInt32, then the content), written with the same calls and signatures: a
/// `handleInput` that parses the header with `parseInput` and delivers the content with
/// `deliverInputNoCopy`, a `handleOutput` that writes the header with `writeOutput` and the
/// content with `writeOutputNoCopy`. Its header is in network byte order.
enum GameMessageKind: UInt32 {
    case invalid = 0
    case join = 1
    case move = 2
    case chat = 3
}

final class GameFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: GameFramer.self)
    static var label: String { "GameFramer" }

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        let header = GameHeader(kind: message.gameKind.rawValue, length: UInt32(messageLength))
        framer.writeOutput(data: header.encoded)
        do {
            try framer.writeOutputNoCopy(length: messageLength)
        } catch {
            framer.markFailed(error: .posix(.EIO))
        }
    }

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var header: GameHeader?
            let size = GameHeader.encodedSize
            let parsed = framer.parseInput(minimumIncompleteLength: size, maximumLength: size) { buffer, isComplete -> Int in
                guard let buffer, buffer.count >= size else { return 0 }
                header = GameHeader(buffer)
                return size
            }
            guard parsed, let header else { return size }
            let message = NWProtocolFramer.Message(gameKind: GameMessageKind(rawValue: header.kind) ?? .invalid)
            if !framer.deliverInputNoCopy(length: Int(header.length), message: message, isComplete: true) {
                return 0
            }
        }
    }
}

extension GameFramer: FramerProtocol {}

extension NWProtocolFramer.Message {
    convenience init(gameKind: GameMessageKind) {
        self.init(definition: GameFramer.definition)
        self["GameMessageKind"] = gameKind
    }

    var gameKind: GameMessageKind {
        self["GameMessageKind"] as? GameMessageKind ?? .invalid
    }
}

struct GameHeader {
    let kind: UInt32
    let length: UInt32

    static let encodedSize = 8

    init(kind: UInt32, length: UInt32) {
        self.kind = kind
        self.length = length
    }

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        kind = UInt32(bigEndian: buffer.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        length = UInt32(bigEndian: buffer.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
    }

    var encoded: Data {
        var data = Data()
        withUnsafeBytes(of: kind.bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: length.bigEndian) { data.append(contentsOf: $0) }
        return data
    }
}
