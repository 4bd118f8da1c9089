import BraidCore
import Foundation

extension NWProtocolFramer {
    /// One connection's framer, as the implementation sees it: how it reads the input, delivers
    /// messages, writes the output and reports its state. Call it from the implementation's
    /// callbacks (and from blocks given to `async(execute:)`), which run on the connection's
    /// loop; `async(execute:)` and `scheduleWakeup(wakeupTime:)` may be called from anywhere.
    ///
    /// Limits, whatever the peer sends: `parseInput` hands at most `maximumLength` bytes, and
    /// the input the framer has not consumed is bounded (`NWProtocolFramer.maximumBufferedInput`, 1 MiB):
    /// a `minimumIncompleteLength` above it, or a framer that consumes nothing of a full
    /// buffer, fails the connection with `NetworkError.messageTooLarge`. A message delivered
    /// is bounded by the stack's maximum message size (16 MiB by default): a larger
    /// `deliverInputNoCopy` length, or partial deliveries adding up to more, fail the
    /// connection the same way before Braid holds more than the bytes that arrived. Output
    /// written in answer to input (`writeOutput` in `handleInput`) that has not gone below is
    /// bounded (64 KiB): past it `parseInput` returns false and `handleInput` is not called
    /// until half of it has gone below, and the connection stops reading meanwhile, so a peer
    /// that sends without reading is stopped by TCP.
    ///
    /// Not implemented: `prependApplicationProtocol(options:)` throws
    /// `NetworkError.unsupported`; a message's content is whole when `handleOutput` runs
    /// (each send is one message).
    ///
    /// `@unchecked Sendable`: everything but `async(execute:)` and `scheduleWakeup` runs on
    /// the connection's loop, as the framer's callbacks do, and those two take a lock.
    public final class Instance: @unchecked Sendable {
        /// When `wakeup(framer:)` should run.
        public enum WakeupTime: Sendable, Hashable {
            /// Never: cancels a wakeup asked for earlier.
            case forever
            /// This many milliseconds from now.
            case milliseconds(UInt64)
        }

        let definition: Definition
        /// The layer this framer runs in, which owns the instance (weakly: a block that keeps
        /// the instance past its connection does nothing).
        private(set) weak var layer: FramerLayer?

        init(definition: Definition, layer: FramerLayer) {
            self.definition = definition
            self.layer = layer
        }

        // MARK: Input

        /// Lends the unconsumed input to `parse` when at least `minimumIncompleteLength` bytes
        /// are buffered: at most `maximumLength` of them, contiguous, with `false` (the stream
        /// goes on). `parse` returns how many bytes to consume. Returns false, without calling
        /// `parse`, while fewer are buffered.
        public func parseInput(
            minimumIncompleteLength: Int, maximumLength: Int, parse: (UnsafeMutableRawBufferPointer?, Bool) -> Int
        ) -> Bool {
            layer?.parseInput(minimum: minimumIncompleteLength, maximum: maximumLength, parse: parse) ?? false
        }

        /// Delivers `data` to the application as a message (with `isComplete` false, the first
        /// part of one: later deliveries add to it). Called while a `deliverInputNoCopy`
        /// message still waits for bytes (from an `async` block), it is delivered after that
        /// message.
        public func deliverInput(data: Data, message: Message, isComplete: Bool) {
            layer?.deliverInput(data, message: message, isComplete: isComplete)
        }

        /// Delivers the next `length` bytes of input as a message (or part of one). Returns
        /// true if they were all buffered and delivered at once; false if the rest is delivered
        /// as it arrives (without calling `handleInput` until then).
        public func deliverInputNoCopy(length: Int, message: Message, isComplete: Bool) -> Bool {
            layer?.deliverInputNoCopy(length: length, message: message, isComplete: isComplete) ?? false
        }

        /// From now on, input goes to the application as it arrives, each run of bytes as a
        /// message (split at the maximum message size), without `handleInput`.
        public func passThroughInput() {
            layer?.passThroughInput()
        }

        // MARK: Output

        /// Inside `handleOutput`: lends the message's unwritten content to `parse` (at most
        /// `maximumLength` bytes) when at least `minimumIncompleteLength` remain; `parse`
        /// returns how many bytes to skip (they are not written).
        public func parseOutput(
            minimumIncompleteLength: Int, maximumLength: Int, parse: (UnsafeMutableRawBufferPointer?, Bool) -> Int
        ) -> Bool {
            layer?.parseOutput(minimum: minimumIncompleteLength, maximum: maximumLength, parse: parse) ?? false
        }

        /// Writes `data` below the framer (a header, a trailer, a handshake message).
        public func writeOutput(data: Data) {
            layer?.writeOutput(data)
        }

        /// Writes `data` below the framer.
        public func writeOutput<Output: DataProtocol>(data: Output) {
            layer?.writeOutput(data)
        }

        /// Inside `handleOutput`: writes the next `length` bytes of the message's content.
        /// Throws `NetworkError.invalidState` for more than remain, or outside `handleOutput`.
        public func writeOutputNoCopy(length: Int) throws {
            guard let layer else { throw NetworkError.invalidState("writeOutputNoCopy on a framer whose connection ended") }
            try layer.writeOutputNoCopy(length: length)
        }

        /// From now on, each message sent is written as it is, without `handleOutput`.
        public func passThroughOutput() {
            layer?.passThroughOutput()
        }

        // MARK: State

        /// The framer's handshake is done (after `start` returned `.willMarkReady`): the
        /// connection becomes ready.
        public func markReady() {
            layer?.markReady()
        }

        /// Ends the connection: with `error`, failed with it; with nil, closed as if the peer
        /// had finished.
        public func markFailed(error: NWError?) {
            layer?.markFailed(error)
        }

        /// Has `wakeup(framer:)` called at `wakeupTime` (replacing a wakeup asked for earlier),
        /// timed on the connection's loop. One asked for before the connection runs the framer
        /// (in `init(framer:)`) is kept and comes once it does.
        public func scheduleWakeup(wakeupTime: WakeupTime) {
            layer?.scheduleWakeup(wakeupTime)
        }

        /// Runs `block` on the connection's loop, where the framer's callbacks run, soon.
        public func async(execute block: @escaping @Sendable () -> Void) {
            layer?.enqueue(block)
        }

        /// Not implemented: throws `NetworkError.unsupported`.
        public func prependApplicationProtocol(options: NWProtocolOptions) throws {
            throw NetworkError.unsupported("prependApplicationProtocol(options:) in a framer (add protocols to the stack before the connection starts)")
        }
    }
}
