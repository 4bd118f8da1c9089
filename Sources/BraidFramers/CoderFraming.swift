import Foundation

/// Why a value could not travel as a `Coder` message.
public enum CoderFramingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The bytes of a message are not a `type` for the decoder; `reason` is the decoder's.
    case decodingFailed(type: String, reason: String)
    /// The value could not be encoded; `reason` is the encoder's.
    case encodingFailed(type: String, reason: String)

    public var description: String {
        switch self {
        case .decodingFailed(let type, let reason): "A message could not be decoded as \(type): \(reason)"
        case .encodingFailed(let type, let reason): "A \(type) could not be encoded: \(reason)"
        }
    }
}

/// How `Coder` values travel: over a byte stream, each value, encoded by the coder, is the
/// value of one TLV message of type `messageType` (0), and a message of another type does not
/// decode; over UDP, each value, encoded by the coder, is one whole datagram (no header).
public enum CoderFraming {
    /// The TLV type of every `Coder` message.
    public static let messageType: UInt32 = 0

    /// `value`'s bytes: the value of its TLV message, or its whole datagram.
    public static func encode<Value: Encodable, Coder: NetworkCoder>(
        _ value: Value, using coder: Coder
    ) throws(CoderFramingError) -> Data {
        do {
            return try coder.makeEncoder().encode(value)
        } catch {
            throw .encodingFailed(type: String(reflecting: Value.self), reason: reason(error))
        }
    }

    /// The value a whole TLV message carries.
    public static func decode<Value: Decodable, Coder: NetworkCoder>(
        _ type: Value.Type, from message: TLVMessage, using coder: Coder
    ) throws(CoderFramingError) -> Value {
        guard message.type == messageType else {
            throw .decodingFailed(
                type: String(reflecting: Value.self),
                reason: "the message has TLV type \(message.type), but Coder messages have type \(messageType)")
        }
        return try decode(type, from: message.value, using: coder)
    }

    /// The value an encoded value's bytes carry: a TLV message's value, or a whole datagram.
    public static func decode<Value: Decodable, Coder: NetworkCoder>(
        _ type: Value.Type, from encoded: Data, using coder: Coder
    ) throws(CoderFramingError) -> Value {
        do {
            return try coder.makeDecoder().decode(Value.self, from: encoded)
        } catch {
            throw .decodingFailed(type: String(reflecting: Value.self), reason: reason(error))
        }
    }

    /// A decoding or encoding error in a sentence: `DecodingError`'s debug description and
    /// where it happened, else the error's description.
    static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context), DecodingError.keyNotFound(_, let context),
            DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(context.debugDescription) (at \(path))"
        case EncodingError.invalidValue(_, let context):
            return context.debugDescription
        default:
            return String(describing: error)
        }
    }
}
