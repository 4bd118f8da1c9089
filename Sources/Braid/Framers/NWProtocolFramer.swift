import BraidCore
import Foundation

/// A protocol of the application's own over a byte stream (TLS or TCP), as Network.framework's
/// custom framers: a class adopting `NWProtocolFramerImplementation` parses the stream into
/// messages and writes each message sent, and both API dialects run it: the classic one with
/// `NWProtocolFramer.Options` in `NWParameters.defaultProtocolStack.applicationProtocols`, the
/// new one with `Framer<T>` in the stack builder.
///
/// ```swift
/// let options = NWProtocolFramer.Options(definition: LinesFramer.definition)
/// let parameters = NWParameters.tcp
/// parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
/// ```
///
/// What Braid runs and what it does not: see `NWProtocolFramer.Instance`.
public enum NWProtocolFramer {
    /// A framer's identity: made once per implementation type and kept (usually a `static let`
    /// of the implementation), it names the framer in options and in messages.
    ///
    /// ```swift
    /// let definition = NWProtocolFramer.Definition(implementation: LinesFramer.self)
    /// ```
    public final class Definition: NWProtocolDefinition, @unchecked Sendable {
        /// The implementation each connection gets an instance of. A metatype carries no state,
        /// so sharing it across threads is safe (the `@unchecked` of the class).
        let implementation: any NWProtocolFramerImplementation.Type

        /// A definition for `implementation`, named by its `label`.
        public init(implementation: any NWProtocolFramerImplementation.Type) {
            self.implementation = implementation
            super.init(name: implementation.label)
        }
    }

    /// What a framer's `start(framer:)` returns.
    public enum StartResult: Sendable, Hashable {
        /// The framer is ready at once: the connection becomes ready when the stack below is.
        case ready
        /// The framer runs a handshake of its own first: the connection becomes ready when it
        /// calls `markReady()`.
        case willMarkReady
    }

    /// A framer in a classic stack: inserted at index 0 of
    /// `NWParameters.defaultProtocolStack.applicationProtocols`, over TLS or TCP.
    ///
    /// `@unchecked Sendable`: its values live behind a lock.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        /// The framer these options run.
        public let definition: Definition
        private let values = FramerValues()

        /// Options running the framer `definition` names.
        public init(definition: Definition) {
            self.definition = definition
        }

        /// Values of the application's own, by key, for the framer to read.
        public subscript(key: String) -> Any? {
            get { values[key] }
            set { values[key] = newValue }
        }

        override func copy() -> NWProtocolOptions {
            let copy = Options(definition: definition)
            copy.values.replace(with: values)
            return copy
        }

        /// The new API's stack: this framer over `lower` (TLS, TCP or UDP).
        override func stack(over lower: any StackBinding) throws -> any StackBinding {
            FramerStack(definition: definition, over: lower)
        }
    }

    /// A message of a framer: what the application sends it with (in a content context's
    /// metadata, or `send(_:metadata:)`'s), and what the framer delivers each received
    /// message with. It carries values of the framer's own, by key.
    ///
    /// ```swift
    /// let message = NWProtocolFramer.Message(definition: LinesFramer.definition)
    /// message["kind"] = "greeting"
    /// let context = NWConnection.ContentContext(identifier: "greeting", metadata: [message])
    /// ```
    ///
    /// `@unchecked Sendable`: its values live behind a lock.
    public final class Message: NWProtocolMetadata, @unchecked Sendable {
        let framerDefinition: Definition?
        private let values = FramerValues()

        /// An empty message of the framer `definition` names (the application's side).
        public init(definition: Definition) {
            framerDefinition = definition
        }

        /// An empty message of `instance`'s framer (the framer's side: for a message it
        /// delivers).
        public init(instance: Instance) {
            framerDefinition = instance.definition
        }

        /// The message's values, by key.
        public subscript(key: String) -> Any? {
            get { values[key] }
            set { values[key] = newValue }
        }

        override var definition: NWProtocolDefinition? { framerDefinition }
    }
}

/// Values of the application's own by key, as options and messages carry them: any value, as
/// Network.framework's take. `@unchecked Sendable`: the dictionary is read and changed only
/// under the lock.
final class FramerValues: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: Any] = [:]

    subscript(key: String) -> Any? {
        get { lock.withLock { values[key] } }
        set { lock.withLock { values[key] = newValue } }
    }

    func replace(with other: FramerValues) {
        let copied = other.lock.withLock { other.values }
        lock.withLock { values = copied }
    }
}

/// A framer's implementation, as Network.framework's: one instance per connection, made with
/// `init(framer:)`, called on the connection's loop (one thread at a time, never concurrently).
///
/// ```swift
/// final class LinesFramer: NWProtocolFramerImplementation {
///     static let label = "Lines"
///     static let definition = NWProtocolFramer.Definition(implementation: LinesFramer.self)
///
///     required init(framer: NWProtocolFramer.Instance) {}
///     func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
///     func wakeup(framer: NWProtocolFramer.Instance) {}
///     func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
///     func cleanup(framer: NWProtocolFramer.Instance) {}
///
///     func handleInput(framer: NWProtocolFramer.Instance) -> Int {
///         while true {
///             var lineLength: Int?
///             let parsed = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 4096) { buffer, _ in
///                 if let newline = buffer?.firstIndex(of: 10) { lineLength = newline }
///                 return 0
///             }
///             guard parsed, let length = lineLength else { return 1 }
///             _ = framer.deliverInputNoCopy(length: length, message: NWProtocolFramer.Message(instance: framer), isComplete: true)
///             _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { _, _ in 1 }
///         }
///     }
///
///     func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
///         try? framer.writeOutputNoCopy(length: messageLength)
///         framer.writeOutput(data: Data([10]))
///     }
/// }
/// ```
public protocol NWProtocolFramerImplementation: AnyObject {
    /// The framer's name (its definition's).
    static var label: String { get }
    /// A new instance for one connection.
    init(framer: NWProtocolFramer.Instance)
    /// Called once the stack below is ready: `.ready`, or `.willMarkReady` for a framer that
    /// runs a handshake first (writing with `writeOutput`, reading in `handleInput`).
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult
    /// New input: parse it with `parseInput`, deliver messages with `deliverInput` or
    /// `deliverInputNoCopy`. Returns how many bytes must be buffered before it is worth
    /// calling again (0: whenever more arrive).
    func handleInput(framer: NWProtocolFramer.Instance) -> Int
    /// A message to send, of `messageLength` bytes: write it with `writeOutput` and
    /// `writeOutputNoCopy`.
    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool)
    /// The time `scheduleWakeup(wakeupTime:)` asked for has come.
    func wakeup(framer: NWProtocolFramer.Instance)
    /// The connection is closing. Braid closes it whatever this returns.
    func stop(framer: NWProtocolFramer.Instance) -> Bool
    /// The connection ended: release what the instance holds.
    func cleanup(framer: NWProtocolFramer.Instance)
}
