import BraidCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A transfer's progress line on standard error, redrawn in place (a carriage return, the
/// line, then erase to its end) every `TransferProgress.redrawInterval` while the transfer
/// runs, and erased when it ends. Transfers count their bytes with `add`, from any task; the
/// line is drawn by one task of its own, so counting costs a lock round and no write.
package final class ProgressDisplay: Sendable {
    private struct State {
        var bytes = 0
        var progress = TransferProgress(total: nil)
        var drawer: Task<Void, Never>?
        var finished = false
        var drawn = false
    }
    private let state = Locked(State())
    private let write: @Sendable (String) -> Void
    /// Whether the line is drawn at all (off: `add` only counts).
    package let isShown: Bool

    /// A display on standard error when it is a terminal and `quiet` is false
    /// (`TransferProgress.isShown`).
    package convenience init(quiet: Bool) {
        self.init(isShown: TransferProgress.isShown(standardErrorIsTerminal: isatty(STDERR_FILENO) == 1, quiet: quiet)) { text in
            FileHandle.standardError.write(Data(text.utf8))
        }
    }

    /// A display that hands its text to `write` (tests).
    package init(isShown: Bool, write: @escaping @Sendable (String) -> Void) {
        self.isShown = isShown
        self.write = write
    }

    /// The bytes moved so far.
    package var bytes: Int { state.withLock { $0.bytes } }

    /// Starts drawing every `TransferProgress.redrawInterval`; `total` is the bytes the
    /// transfer will move, when known (it may be set later, as when a response's length
    /// arrives with its head).
    package func start(total: Int?) {
        guard isShown else { return }
        let clock = ContinuousClock()
        let started = clock.now
        state.withLock { state in
            state.progress.total = total
            guard state.drawer == nil, !state.finished else { return }
            state.drawer = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: TransferProgress.redrawInterval)
                    guard let self, !Task.isCancelled else { return }
                    self.redraw(seconds: (clock.now - started).seconds)
                }
            }
        }
    }

    /// Draws the line for the bytes so far, `seconds` after the start (the drawer's tick).
    package func redraw(seconds: Double) {
        guard isShown else { return }
        let line = state.withLock { state -> String? in
            guard !state.finished else { return nil }
            state.drawn = true
            return state.progress.line(bytes: state.bytes, seconds: seconds)
        }
        if let line { write("\r" + line + "\u{1B}[K") }
    }

    /// The transfer's total is now known.
    package func setTotal(_ total: Int?) {
        state.withLock { $0.progress.total = total }
    }

    package func add(_ count: Int) {
        state.withLock { $0.bytes += count }
    }

    /// Stops drawing and erases the line, so what is printed next starts on a clean line.
    package func finish() async {
        let drawer = state.withLock { state -> Task<Void, Never>? in
            defer { state.drawer = nil }
            return state.drawer
        }
        if let drawer {
            drawer.cancel()
            // The drawer's last line is written before the erase.
            await drawer.value
        }
        let drawn = state.withLock { state -> Bool in
            state.finished = true
            return state.drawn
        }
        if drawn { write("\r\u{1B}[K") }
    }
}
