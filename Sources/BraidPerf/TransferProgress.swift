import Foundation

/// The text of a transfer's progress line: bytes so far (and of how many, when the total is
/// known), the rate, and the time left. Pure: the caller supplies the byte count and the
/// time, so the formatting is tested without a terminal or a clock.
///
/// The rate is smoothed over the samples (each new sample weighs a third), so a line redrawn
/// a few times a second does not jump with every burst.
package struct TransferProgress: Sendable {
    /// The bytes the transfer will move in all, when known (zero or less: not known).
    package var total: Int?
    private var last: (bytes: Int, seconds: Double)?
    private var smoothedRate: Double?

    /// How often a terminal's line is redrawn at most.
    package static let redrawInterval: Duration = .milliseconds(250)

    package init(total: Int?) {
        self.total = total
    }

    /// Whether a progress line is drawn: only on a terminal, and not with `--quiet` (a line
    /// redrawn with carriage returns would litter a file or a pipe).
    package static func isShown(standardErrorIsTerminal: Bool, quiet: Bool) -> Bool {
        standardErrorIsTerminal && !quiet
    }

    /// The line for `bytes` moved `seconds` after the start; each call is a sample of the rate.
    package mutating func line(bytes: Int, seconds: Double) -> String {
        if let last, seconds > last.seconds {
            let sample = Double(max(0, bytes - last.bytes)) / (seconds - last.seconds)
            smoothedRate = smoothedRate.map { $0 + (sample - $0) / 3 } ?? sample
            self.last = (bytes, seconds)
        } else if last == nil {
            // The first sample: the average since the start.
            if seconds > 0 { smoothedRate = Double(bytes) / seconds }
            last = (bytes, seconds)
        }
        var parts: [String] = []
        let total = self.total.flatMap { $0 > 0 ? $0 : nil }
        if let total {
            let percent = min(100, Int(Double(bytes) * 100 / Double(total)))
            parts.append("\(Self.bytes(bytes)) / \(Self.bytes(total)) (\(percent)%)")
        } else {
            parts.append(Self.bytes(bytes))
        }
        if let smoothedRate {
            parts.append(Self.rate(smoothedRate))
            if let total, bytes < total, smoothedRate > 0 {
                parts.append("ETA \(Self.duration(Double(total - bytes) / smoothedRate))")
            }
        }
        return parts.joined(separator: "  ")
    }

    /// A byte count in binary units: "512 B", "1.5 KiB", "12.3 MiB", "140 MiB" (one decimal
    /// below 100).
    package static func bytes(_ count: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(max(0, count))
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(max(0, count)) B" }
        // Rounded to what is printed, so 1023.96 KiB reads "1.0 MiB", not "1024 KiB".
        if value.rounded() >= 1024 && unit < units.count - 1 { return "1.0 \(units[unit + 1])" }
        return String(format: value < 99.95 ? "%.1f" : "%.0f", value) + " " + units[unit]
    }

    /// A rate in binary units per second: "0 B/s", "4.2 MiB/s".
    package static func rate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond > 0 else { return "0 B/s" }
        return bytes(Int(min(bytesPerSecond, Double(Int.max / 2)))) + "/s"
    }

    /// A duration as minutes and seconds, or hours, minutes and seconds: "0:05", "12:34",
    /// "1:02:03"; "--:--" when it cannot be estimated (longer than 100 days).
    package static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0, seconds < 100 * 86_400 else { return "--:--" }
        let whole = Int(seconds.rounded(.up))
        let (hours, minutes, rest) = (whole / 3600, whole / 60 % 60, whole % 60)
        return hours > 0
            ? String(format: "%d:%02d:%02d", hours, minutes, rest) : String(format: "%d:%02d", minutes, rest)
    }
}
