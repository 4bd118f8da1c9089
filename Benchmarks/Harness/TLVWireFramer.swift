import Braid
import Foundation

/// TLV's wire (type then length, UInt32 big-endian each, then the value) as a custom framer,
/// for the framed roles' `tlv-framer-tcp` runs: what `TLV { TCP() }` costs when its framing
/// runs through the framer machinery (`Framer<TLVWireFramer> { TCP() }`) instead of TLV's own
/// decoder. It speaks to `TLV { TCP() }`; a message's type is its `"type"` value.
final class TLVWireFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: TLVWireFramer.self)
    static var label: String { "TLVWire" }

    /// A message of `type`, to send.
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
            var type: UInt32 = 0, length = 0
            let parsed = framer.parseInput(minimumIncompleteLength: 8, maximumLength: 8) { buffer, _ in
                guard let buffer, buffer.count >= 8 else { return 0 }
                type = UInt32(bigEndian: buffer.loadUnaligned(as: UInt32.self))
                length = Int(UInt32(bigEndian: buffer.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
                return 8
            }
            guard parsed else { return 8 }
            let message = NWProtocolFramer.Message(instance: framer)
            message["type"] = type
            if !framer.deliverInputNoCopy(length: length, message: message, isComplete: true) { return 0 }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        let type = message["type"] as? UInt32 ?? 0
        var header = [UInt8](repeating: 0, count: 8)
        header.withUnsafeMutableBytes { header in
            header.storeBytes(of: type.bigEndian, as: UInt32.self)
            header.storeBytes(of: UInt32(messageLength).bigEndian, toByteOffset: 4, as: UInt32.self)
        }
        framer.writeOutput(data: header)
        do {
            try framer.writeOutputNoCopy(length: messageLength)
        } catch {
            framer.markFailed(error: .posix(.EIO))
        }
    }
}
