import Braid
import BraidPerf

extension CommandFailure {
    /// Runs `work` until it returns or `seconds` pass, whichever comes first (then its task is
    /// cancelled and the result is a failure that says how long it waited). `what` names the
    /// work in the message of a run that ended without a result.
    static func outcome<T: Sendable>(
        of work: @escaping @Sendable () async throws -> T, within seconds: Double, what: String
    ) async -> Result<T, any Error> {
        await withTaskGroup(of: Result<T, any Error>?.self) { group in
            group.addTask { await Result { try await work() } }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                return Task.isCancelled ? nil : .failure(CommandFailure("timed out after \(seconds) s"))
            }
            // The timer yields nil only when cancelled, which happens after the work finished.
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(CommandFailure("the \(what) ended without a result"))
        }
    }

    /// `--session-file`'s cache, or a failure that names the option and the file.
    static func sessionCache(file: String) throws -> QUIC.SessionCache {
        do {
            return try QUIC.SessionCache(file: file)
        } catch {
            throw CommandFailure("--session-file \(file): \(error)")
        }
    }
}
