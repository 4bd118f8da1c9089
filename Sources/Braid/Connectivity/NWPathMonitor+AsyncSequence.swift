/// `for await path in monitor`, as in Apple's API since 2023: the current path first (once the
/// monitor has one), then every change. Iterating starts a monitor nobody started; the loop
/// ends when the monitor is cancelled.
///
/// ```swift
/// func waitUntilOnline() async -> NWPath? {
///     for await path in NWPathMonitor() where path.status == .satisfied {
///         return path
///     }
///     return nil
/// }
/// ```
///
/// Each iterator keeps at most the 8 newest paths its reader has not taken yet; older ones
/// are dropped (the newest is what matters).
extension NWPathMonitor: AsyncSequence {
    public typealias Element = NWPath

    /// Paths as they come, for one reader. It keeps its monitor alive.
    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = NWPath
        private let monitor: NWPathMonitor
        private var paths: AsyncStream<NWPath>.Iterator

        fileprivate init(_ monitor: NWPathMonitor) {
            self.monitor = monitor
            let (stream, continuation) = AsyncStream.makeStream(of: NWPath.self, bufferingPolicy: .bufferingNewest(NWPathMonitor.iteratorBufferLimit))
            monitor.addStream(continuation)
            paths = stream.makeAsyncIterator()
        }

        /// The next path; nil once the monitor is cancelled.
        public mutating func next() async -> NWPath? {
            await paths.next()
        }
    }

    /// Paths an iterator holds for a reader that has not taken them.
    static let iteratorBufferLimit = 8

    public func makeAsyncIterator() -> Iterator {
        Iterator(self)
    }
}
