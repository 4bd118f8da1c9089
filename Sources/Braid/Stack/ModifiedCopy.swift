/// The stacks' and parameters' modifiers return a changed copy (`TLS().alpn(["h2"])`): one
/// helper for all of them instead of a copy, an assignment and a return in each.
protocol ModifiedCopy {}

extension ModifiedCopy {
    /// A copy of `self` with `change` applied.
    func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}

extension QUIC: ModifiedCopy {}
extension TLS: ModifiedCopy {}
extension TCP: ModifiedCopy {}
extension UDP: ModifiedCopy {}
extension IP: ModifiedCopy {}
extension TLV: ModifiedCopy {}
extension Coder: ModifiedCopy {}
extension NetworkParameters: ModifiedCopy {}
