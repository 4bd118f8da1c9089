import BraidCore
import BraidWebSocket

/// An application's answer to an upgrade request on its way from the thread that gave it to
/// the layer's loop: the first answer counts, later ones are ignored.
final class WebSocketPendingAnswer: Sendable {
    private let stored = Locked<WebSocketRequestAnswer?>(nil)

    /// Records the answer; false if one was already given.
    @discardableResult
    func give(_ answer: WebSocketRequestAnswer) -> Bool {
        stored.withLock { stored in
            guard stored == nil else { return false }
            stored = answer
            return true
        }
    }

    /// The answer, if given.
    var given: WebSocketRequestAnswer? { stored.withLock { $0 } }
}
