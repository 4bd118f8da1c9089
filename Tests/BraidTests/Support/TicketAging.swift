import BraidTLS
import Foundation

/// Waits until GnuTLS itself no longer offers a ticket with `validity`: its age in whole
/// seconds exceeds its lifetime. With a server's ticket lifetime of 1 second that is two seconds after
/// the ticket arrived; the deadline is generous for a loaded machine. Returns false at the deadline.
func untilGnuTLSDropsTicket(_ validity: TLSTicketValidity, deadline: Duration = .seconds(30)) async throws -> Bool {
    let end = ContinuousClock.now + deadline
    while !validity.isExpiredForGnuTLS() {
        guard ContinuousClock.now < end else { return false }
        // The clock is the event: poll it (nothing else announces that a ticket aged).
        try await Task.sleep(for: .milliseconds(20))
    }
    return true
}
