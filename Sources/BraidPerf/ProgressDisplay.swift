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
        var total: Int?
        var drawer: Task<Void, Never>?
        var finished = false
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

    /// Starts drawing; `total` is the bytes the transfer will move, when known (it may be set
    /// later, as when a response's length arrives with its head).
    package func start(total: Int?) {
        guard isShown else { return }
        let clock = ContinuousClock()
        let started = clock.now
        state.withLock { state in
            state.total = total
            guard state.drawer == nil, !state.finished else { return }
            state.drawer = Task { [weak self] in
                var progress = TransferProgress(total: total)
                while !Task.isCancelled {
                    try? await Task.sleep(for: TransferProgress.redrawInterval)
                    guard let self, !Task.isCancelled else { return }
                    let bytes: Int
                    (bytes, progress.total) = self.state.withLock { ($0.bytes, $0.total) }
                    self.write("\r" + progress.line(bytes: bytes, seconds: (clock.now - started).seconds) + "\u{1B}[K")
                }
            }
        }
    }

    /// The transfer's total is now known.
    package func setTotal(_ total: Int?) {
        state.withLock { $0.total = total }
    }

    package func add(_ count: Int) {
        state.withLock { $0.bytes += count }
    }

    /// Stops drawing and erases the line, so what is printed next starts on a clean line.
    package func finish() async {
        let drawer = state.withLock { state -> Task<Void, Never>? in
            state.finished = true
            defer { state.drawer = nil }
            return state.drawer
        }
        guard let drawer else { return }
        drawer.cancel()
        // The drawer's last line is written before the erase.
        await drawer.value
        write("\r\u{1B}[K")
    }
}
