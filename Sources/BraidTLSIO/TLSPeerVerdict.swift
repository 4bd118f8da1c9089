import BraidCore

/// A judge's verdict on its way from the thread that gave it to the layer's loop: the first
/// answer counts, later ones are ignored.
final class TLSPeerVerdict: Sendable {
    private enum Stage {
        case open
        case given(Bool)
        case taken
    }
    private let stage = Locked(Stage.open)

    /// Records the verdict; false if one was already given.
    @discardableResult
    func give(_ accepted: Bool) -> Bool {
        stage.withLock { stage in
            guard case .open = stage else { return false }
            stage = .given(accepted)
            return true
        }
    }

    /// The verdict, once (nil before it is given).
    func take() -> Bool? {
        stage.withLock { stage in
            guard case .given(let accepted) = stage else { return nil }
            stage = .taken
            return accepted
        }
    }
}
