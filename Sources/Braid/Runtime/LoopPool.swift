import BraidIO
import Foundation
import Synchronization

/// The event loops Braid's connections and listeners run on: one per core, made on first use,
/// alive for the life of the process. Connections are spread over them round-robin.
enum LoopPool {
    private static let all: [EventLoop] = {
        let count = max(1, ProcessInfo.processInfo.activeProcessorCount)
        return (0..<count).map { index in
            do {
                return try EventLoop(name: "braid-\(index)")
            } catch {
                // Only a process out of file descriptors (or a kernel without epoll) gets here.
                fatalError("Braid cannot create its event loop: \(error)")
            }
        }
    }()
    private static let next = Atomic<Int>(0)

    /// The next loop in turn.
    static func loop() -> EventLoop {
        let index = next.add(1, ordering: .relaxed).oldValue
        return all[index % all.count]
    }

    /// `count` loops (at most one per core), for a listener serving on several.
    static func loops(_ count: Int) -> [EventLoop] {
        let first = next.add(1, ordering: .relaxed).oldValue
        return (0..<min(max(count, 1), all.count)).map { all[(first + $0) % all.count] }
    }
}
