import BraidCore
import BraidPerf
import Foundation
import Testing

/// The progress line of `braid get` and `braid client`: its text from byte counts and times,
/// when it is drawn, and the display's redraw and erase.
@Suite struct TransferProgressTests {
    @Test func bytesReadInBinaryUnitsWithOneDecimalBelowAHundred() {
        #expect(TransferProgress.bytes(0) == "0 B")
        #expect(TransferProgress.bytes(1023) == "1023 B")
        #expect(TransferProgress.bytes(1024) == "1.0 KiB")
        #expect(TransferProgress.bytes(1536) == "1.5 KiB")
        #expect(TransferProgress.bytes(12_900_000) == "12.3 MiB")
        #expect(TransferProgress.bytes(150 * 1024 * 1024) == "150 MiB")
        // Just under a MiB rounds up to the next unit, not to "1024 KiB".
        #expect(TransferProgress.bytes(1024 * 1024 - 1) == "1.0 MiB")
        #expect(TransferProgress.bytes(3 << 40) == "3.0 TiB")
    }

    @Test func ratesAndDurations() {
        #expect(TransferProgress.rate(0) == "0 B/s")
        #expect(TransferProgress.rate(4.2 * 1024 * 1024) == "4.2 MiB/s")
        #expect(TransferProgress.duration(4.2) == "0:05")
        #expect(TransferProgress.duration(754) == "12:34")
        #expect(TransferProgress.duration(3723) == "1:02:03")
        #expect(TransferProgress.duration(.infinity) == "--:--")
        #expect(TransferProgress.duration(200 * 86_400) == "--:--")
    }

    @Test func aKnownTotalGivesThePercentageAndTheTimeLeftAtASmoothedRate() {
        var progress = TransferProgress(total: 1000 * 1024)
        // The first sample: the average since the start, 100 KiB/s; 900 KiB left take 9 s.
        #expect(progress.line(bytes: 100 * 1024, seconds: 1) == "100 KiB / 1000 KiB (10%)  100 KiB/s  ETA 0:09")
        // 300 KiB/s over the next second moves the rate a third of the way: 166.7 KiB/s.
        #expect(progress.line(bytes: 400 * 1024, seconds: 2) == "400 KiB / 1000 KiB (40%)  167 KiB/s  ETA 0:04")
        // Done: no time left to show.
        #expect(progress.line(bytes: 1000 * 1024, seconds: 3) == "1000 KiB / 1000 KiB (100%)  311 KiB/s")
    }

    @Test func anUnknownTotalGivesBytesAndRateOnly() {
        var progress = TransferProgress(total: nil)
        #expect(progress.line(bytes: 0, seconds: 0) == "0 B")
        #expect(progress.line(bytes: 1536, seconds: 0.5) == "1.5 KiB  3.0 KiB/s")
        var zero = TransferProgress(total: 0)
        #expect(zero.line(bytes: 2048, seconds: 1) == "2.0 KiB  2.0 KiB/s")
    }

    @Test func drawnOnlyOnATerminalAndNotWhenQuiet() {
        #expect(TransferProgress.isShown(standardErrorIsTerminal: true, quiet: false))
        #expect(!TransferProgress.isShown(standardErrorIsTerminal: true, quiet: true))
        #expect(!TransferProgress.isShown(standardErrorIsTerminal: false, quiet: false))
        #expect(!TransferProgress.isShown(standardErrorIsTerminal: false, quiet: true))
    }

    @Test func aShownDisplayRedrawsInPlaceAndErasesItsLineAtTheEnd() async {
        let written = Written()
        let display = ProgressDisplay(isShown: true) { text in written.text.withLock { $0.append(text) } }
        display.add(1024)
        display.setTotal(2048)
        display.redraw(seconds: 1)
        await display.finish()
        // Drawing after the end writes nothing more.
        display.redraw(seconds: 2)
        #expect(written.text.withLock { $0 } == ["\r1.0 KiB / 2.0 KiB (50%)  1.0 KiB/s  ETA 0:01\u{1B}[K", "\r\u{1B}[K"])
        #expect(display.bytes == 1024)
    }

    @Test func aStartedDisplayDrawsByItself() async throws {
        let written = Written()
        let display = ProgressDisplay(isShown: true) { text in written.text.withLock { $0.append(text) } }
        display.start(total: nil)
        display.add(5)
        let deadline = ContinuousClock.now + .seconds(120)
        while written.text.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        await display.finish()
        let lines = written.text.withLock { $0 }
        try #require(lines.count >= 2, "no line was drawn within 120 seconds")
        #expect(lines[0].hasPrefix("\r5 B"))
        #expect(lines.last == "\r\u{1B}[K")
    }

    @Test func aHiddenDisplayCountsAndWritesNothing() async {
        let written = Written()
        let display = ProgressDisplay(isShown: false) { text in written.text.withLock { $0.append(text) } }
        display.start(total: nil)
        display.add(10)
        display.add(5)
        await display.finish()
        #expect(display.bytes == 15)
        #expect(written.text.withLock { $0 }.isEmpty)
    }
}

/// What a display wrote.
private final class Written: Sendable {
    let text = Locked<[String]>([])
}
