import BraidCore
import Logging

/// Apple's `NWError` carries a code only; the reason Braid knows (which option, which
/// certificate, what to do) goes to the log when a classic connection or listener waits or
/// fails, so the code in a state handler comes with its explanation in the console.
enum ClassicFailureLog {
    private static var logger: Logger { BraidLog.logger(label: "braid.classic") }

    /// Logs why `what` reached `state`, if it is `waiting` or `failed`.
    static func record(_ state: NetworkConnectionState, of what: @autoclosure () -> String) {
        switch state {
        case .waiting(let error): logger.notice("\(what()) is waiting (\(NWError(error))): \(error)")
        case .failed(let error): logger.error("\(what()) failed (\(NWError(error))): \(error)")
        default: break
        }
    }
}
