import Foundation
import Testing

/// How much larger the hostile-peer suites' attacks are (`BRAID_HOSTILE_SCALE`, default 1):
/// tools/run-hostile-suite.sh runs `QUICAttackTests` and `HTTP3FloodTests` again with bigger
/// counts, as their long form. The bounds they check do not grow with the counts.
enum HostileScale {
    static let factor = max(1, Int(ProcessInfo.processInfo.environment["BRAID_HOSTILE_SCALE"] ?? "") ?? 1)

    /// `count` times the factor.
    static func count(_ count: Int) -> Int { count * factor }

    /// A deadline in seconds for an attack of scaled counts.
    static func seconds(_ seconds: Double) -> Double { seconds * Double(factor) }

    /// The suites' time limit: five minutes a test, times the factor.
    static var timeLimit: TimeLimitTrait { .timeLimit(.minutes(5 * factor)) }
}
