import Braid
import BraidTLS
import Foundation
import Testing

/// What users print: the error's own words, also through Foundation's `localizedDescription`.
@Suite struct NetworkErrorTests {
    @Test func localizedDescriptionSaysWhatHappened() {
        let errors: [NetworkError] = [
            .dnsNameNotFound(host: "no-such-host.invalid"), .certificateRejected(.untrusted), .alpnMismatch(offered: ["h3"]),
            .noResponse(endpoint: "127.0.0.1:9", timeout: .seconds(1)), .cancelled,
        ]
        for error in errors {
            #expect((error as any Error).localizedDescription == error.description)
            #expect(!error.localizedDescription.contains("could not be completed"))
        }
        #expect(NetworkError.dnsNameNotFound(host: "no-such-host.invalid").localizedDescription.contains("no-such-host.invalid"))
    }
}
