/// An error of one stack's engine, channel or framer that knows its public form. Each stack's
/// folder adds the conformance for its own errors, so `NetworkError.init(_:)` names none.
protocol NetworkErrorConvertible: Error {
    /// The public form; `endpoint` and `handshakeTimeout` fill in the cases that name them.
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError
}
