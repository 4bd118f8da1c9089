import Foundation

/// Turns values into bytes, for a `NetworkCoder`. `JSONEncoder` and `PropertyListEncoder`
/// conform as they are.
public protocol NetworkEncoder {
    func encode<Value: Encodable>(_ value: Value) throws -> Data
}

/// Turns bytes back into values, for a `NetworkCoder`. `JSONDecoder` and `PropertyListDecoder`
/// conform as they are.
public protocol NetworkDecoder {
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value
}

extension JSONEncoder: NetworkEncoder {}
extension JSONDecoder: NetworkDecoder {}
extension PropertyListEncoder: NetworkEncoder {}
extension PropertyListDecoder: NetworkDecoder {}

/// The format a `Coder` stack sends values in, as in Network.framework: `.json`,
/// `.propertyList`, or a user's own. A coder makes a fresh encoder per value sent and a fresh
/// decoder per value received (`makeEncoder()` / `makeDecoder()`), so the encoders themselves
/// need not be `Sendable`; the coder must be.
///
/// ```swift
/// struct CompactJSON: NetworkCoder {
///     func makeEncoder() -> JSONEncoder {
///         let encoder = JSONEncoder()
///         encoder.outputFormatting = .sortedKeys
///         return encoder
///     }
///     func makeDecoder() -> JSONDecoder { JSONDecoder() }
/// }
/// ```
public protocol NetworkCoder: Sendable {
    associatedtype Encoder: NetworkEncoder
    associatedtype Decoder: NetworkDecoder
    /// An encoder for one value.
    func makeEncoder() -> Encoder
    /// A decoder for one value.
    func makeDecoder() -> Decoder
}

/// JSON (`JSONEncoder` / `JSONDecoder` with their defaults): `Coder(T.self, using: .json)`.
public struct NetworkJSONCoder: NetworkCoder, Hashable {
    public init() {}
    public func makeEncoder() -> JSONEncoder { JSONEncoder() }
    public func makeDecoder() -> JSONDecoder { JSONDecoder() }
}

/// Property lists (binary by default): `Coder(T.self, using: .propertyList)`.
public struct NetworkPropertyListCoder: NetworkCoder, Hashable {
    /// The format values are encoded in (decoding accepts every format).
    public var format: PropertyListSerialization.PropertyListFormat

    public init(format: PropertyListSerialization.PropertyListFormat = .binary) { self.format = format }

    public func makeEncoder() -> PropertyListEncoder {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = format
        return encoder
    }

    public func makeDecoder() -> PropertyListDecoder { PropertyListDecoder() }
}

extension NetworkCoder where Self == NetworkJSONCoder {
    /// JSON, with `JSONEncoder`'s and `JSONDecoder`'s defaults.
    public static var json: NetworkJSONCoder { NetworkJSONCoder() }
}

extension NetworkCoder where Self == NetworkPropertyListCoder {
    /// Binary property lists.
    public static var propertyList: NetworkPropertyListCoder { NetworkPropertyListCoder() }
}
