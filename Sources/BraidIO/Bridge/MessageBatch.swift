import DequeModule
import Foundation

/// Datagrams one iterator took from the inbox and has not handed out yet. A class so that the
/// ones left over when the iterator is dropped (a `break` out of `for await`) go back to the
/// inbox for the next reader instead of being lost.
package final class MessageBatch<Element: Sendable> {
    private let inbox: MessageInbox<Element>
    /// Unchecked exclusivity: one iterator's, used by one task at a time, never `inout` across a
    /// call that could reach it; the run-time check cost a runtime call per datagram.
    @exclusivity(unchecked) private var items = Deque<Element>()

    package init(inbox: MessageInbox<Element>) {
        self.inbox = inbox
    }

    /// The next datagram this batch already took from the inbox, without suspending; nil when
    /// it has none left (then `take` or `next` waits for more). Specialized here for the two
    /// element types (callers in other modules call those entry points: `@inlinable` on a
    /// package class's method left them calling the generic one), so a datagram is handed out
    /// with no generic metadata lookup or async call.
    @_specialize(exported: true, where Element == ReceivedDatagram)
    @_specialize(exported: true, where Element == Data)
    package func takeQueued() -> Element? {
        items.popFirst()
    }

    /// The next datagram, or nil once the connection has ended and every datagram was read
    /// (or the task was cancelled).
    package func next() async -> Element? {
        try? await take()
    }

    /// The next datagram, or nil once the connection has ended and every datagram was read;
    /// throws `CancellationError` if the task is cancelled while it waits. Specialized as
    /// `takeQueued` is: the generic body looked up the inbox's generic types' metadata at run
    /// time on every batch.
    @_specialize(exported: true, where Element == ReceivedDatagram)
    @_specialize(exported: true, where Element == Data)
    package func take() async throws -> Element? {
        if let item = items.popFirst() { return item }
        // The emptied deque goes back to the inbox, which fills it next.
        try await inbox.takeAll(swappingWith: &items)
        return items.popFirst()
    }

    deinit {
        inbox.putBack(items)
    }
}
