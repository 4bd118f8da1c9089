/// The stacks' and parameters' modifiers return a changed copy (`TLS().alpn(["h2"])`): one
/// helper for all of them instead of a copy, an assignment and a return in each. Each stack
/// declares its conformance in its own folder.
protocol ModifiedCopy {}

extension ModifiedCopy {
    /// A copy of `self` with `change` applied.
    func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}

extension IP: ModifiedCopy {}
extension NetworkParameters: ModifiedCopy {}
