import BraidCore

/// A value one thread sets and another reads.
final class SharedSlot<Value: Sendable>: Sendable {
    private let slot = Locked<Value?>(nil)
    var value: Value? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}
