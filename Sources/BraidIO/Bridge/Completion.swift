import BraidCore

/// One pending async call waiting on loop-side state (bytes to read, room to send, the
/// handshake). The loop resumes it with a result; task cancellation resumes it with
/// `CancellationError` from any thread. Whichever comes first wins; `resume` tells the
/// loop whether its result was taken, so bytes meant for a cancelled receive are kept.
///
/// The continuation is an `UnsafeContinuation`: the state below hands it out exactly once
/// (resume, claim and cancel each take it under the lock and leave `.done`), which is what a
/// checked continuation would verify at the cost of an allocation per wait. The small methods
/// are always inlined so that they run specialized for the caller's `Value`: called through the
/// generic class they looked up type metadata at run time on every receive that waited.
package final class Completion<Value: Sendable>: Sendable {
    private enum State {
        case waiting
        case installed(UnsafeContinuation<Value, any Error>)
        case cancelledEarly
        case done
    }
    private let state = Locked<State>(.waiting)

    /// False once resumed or cancelled: the loop drops it from its wait lists.
    @inline(__always) package var isPending: Bool {
        state.withLock { if case .done = $0 { false } else if case .cancelledEarly = $0 { false } else { true } }
    }

    @inline(__always) private func install(_ continuation: UnsafeContinuation<Value, any Error>) {
        let cancelled = state.withLock { state -> Bool in
            if case .cancelledEarly = state {
                state = .done
                return true
            }
            state = .installed(continuation)
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
    }

    /// Delivers the outcome; false if the call was already cancelled (the result is unused).
    @discardableResult @inline(__always)
    package func resume(_ result: Result<Value, any Error>) -> Bool {
        let continuation = state.withLock { state -> UnsafeContinuation<Value, any Error>? in
            guard case .installed(let continuation) = state else { return nil }
            state = .done
            return continuation
        }
        continuation?.resume(with: result)
        return continuation != nil
    }

    /// Takes the call over under the caller's own lock, for a result decided there (bytes
    /// taken from a shared buffer): from now on cancellation cannot win, so the result is sure
    /// to reach the caller and nothing has to be put back. Resume the claim once the lock is
    /// released. Nil if the call was cancelled already.
    @inline(__always) package func claim() -> Claim? {
        state.withLock { state -> Claim? in
            guard case .installed(let continuation) = state else { return nil }
            state = .done
            return Claim(continuation: continuation)
        }
    }

    /// A claimed call, resumed exactly once.
    package struct Claim: Sendable {
        fileprivate let continuation: UnsafeContinuation<Value, any Error>
        package func resume(_ result: Result<Value, any Error>) { continuation.resume(with: result) }
    }

    @inline(__always) fileprivate func cancel() {
        let continuation = state.withLock { state -> UnsafeContinuation<Value, any Error>? in
            switch state {
            case .waiting:
                state = .cancelledEarly
                return nil
            case .installed(let continuation):
                state = .done
                return continuation
            case .cancelledEarly, .done:
                return nil
            }
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// Runs `start` on `loop` with a completion the loop resumes later; throws
    /// `CancellationError` as soon as the calling task is cancelled.
    package static func wait(on loop: EventLoop, _ start: @escaping @Sendable (LoopContext, Completion<Value>) -> Void) async throws -> Value {
        try await wait { completion in
            loop.execute { context in
                guard completion.isPending else { return }
                start(context, completion)
            }
        }
    }

    /// Hands `register` a completion that some other thread resumes later (`register` stores
    /// it); throws `CancellationError` as soon as the calling task is cancelled.
    package static func wait(_ register: (Completion<Value>) -> Void) async throws -> Value {
        let completion = Completion<Value>()
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                completion.install(continuation)
                register(completion)
            }
        } onCancel: {
            completion.cancel()
        }
    }
}
