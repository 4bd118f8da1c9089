import BraidDiscovery
import Testing

/// The DNS wire format: round trips of every record type DNS-SD uses, compression, the mDNS
/// class bits, and hostile packets (pointer loops, truncation, huge counts, bad lengths).
@Suite struct DNSMessageTests {
    static let type = try! DNSName("_game._tcp.local")
    static let instance = try! DNSName(prefix: Array("Table 7".utf8), type)
    static let host = try! DNSName("table-host.local")

    static var response: DNSMessage {
        DNSMessage(
            isResponse: true, isAuthoritative: true,
            answers: [DNSResourceRecord(name: type, ttl: 4500, data: .ptr(instance))],
            additionals: [
                DNSResourceRecord(name: instance, cacheFlush: true, ttl: 120, data: .srv(priority: 0, weight: 0, port: 4433, target: host)),
                DNSResourceRecord(name: instance, cacheFlush: true, ttl: 4500, data: .txt([Array("players=4".utf8), Array("open".utf8), []])),
                DNSResourceRecord(name: host, cacheFlush: true, ttl: 120, data: .a([192, 168, 7, 1])),
                DNSResourceRecord(name: host, cacheFlush: true, ttl: 120, data: .aaaa([0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1])),
                DNSResourceRecord(name: instance, cacheFlush: true, ttl: 120, data: .nsec(next: instance, types: [.txt, .srv])),
                DNSResourceRecord(name: host, ttl: 10, data: .other(type: DNSRecordType(rawValue: 99), bytes: [1, 2, 3])),
            ])
    }

    @Test func aResponseRoundTrips() throws {
        let bytes = Self.response.serialized()
        let parsed = try DNSMessage(parsing: bytes)
        #expect(parsed == Self.response)
        #expect(parsed.additionals[0].cacheFlush)
        #expect(!parsed.answers[0].cacheFlush)
        #expect(parsed.isAuthoritative && parsed.isResponse)
    }

    @Test func namesAreCompressed() throws {
        let bytes = Self.response.serialized()
        // "_game._tcp.local" is written in full once for the compressible names (later names
        // point at it), and once more in the NSEC record's next name, which is never compressed.
        let game = Array("_game".utf8)
        let occurrences = bytes.indices.dropLast(game.count).filter { Array(bytes[$0..<$0 + game.count]) == game }
        #expect(occurrences.count == 2)
        // The host's name, first written as the SRV target, is pointed at by the A, AAAA and
        // other records' owner names.
        let host = Array("table-host".utf8)
        #expect(bytes.indices.dropLast(host.count).filter { Array(bytes[$0..<$0 + host.count]) == host }.count == 1)
    }

    @Test func aQueryKeepsTheUnicastBitAndTheTruncatedFlag() throws {
        let query = DNSMessage(
            isResponse: false, isTruncated: true,
            questions: [DNSQuestion(name: Self.type, type: .ptr, unicastResponse: true), DNSQuestion(name: Self.host, type: .any)],
            answers: [DNSResourceRecord(name: Self.type, ttl: 3000, data: .ptr(Self.instance))])
        let parsed = try DNSMessage(parsing: query.serialized())
        #expect(parsed == query)
        #expect(parsed.questions[0].unicastResponse)
        #expect(!parsed.questions[1].unicastResponse)
        #expect(parsed.isTruncated)
    }

    @Test func namesCompareWithoutCase() throws {
        #expect(try DNSName("_Game._TCP.Local") == Self.type)
        #expect(try DNSName("_Game._TCP.Local").hashValue == Self.type.hashValue)
        #expect(try DNSName("_gamf._tcp.local") != Self.type)
        #expect(Self.instance.parent == Self.type)
        #expect(Self.instance.hasSuffix(try DNSName("local")))
        #expect(Self.instance.labels[0] == Array("Table 7".utf8))
    }

    @Test func anEmptyTXTRecordIsOneEmptyString() throws {
        let record = DNSResourceRecord(name: Self.instance, ttl: 1, data: .txt([]))
        let bytes = DNSMessage(isResponse: true, answers: [record]).serialized()
        #expect(bytes.suffix(3) == [0, 1, 0])
        #expect(try DNSMessage(parsing: bytes).answers == [record])
    }

    @Test func nameLimitsAreChecked() {
        #expect(throws: DNSWireError.self) { try DNSName(labels: [[UInt8](repeating: 0x61, count: 64)]) }
        #expect(throws: DNSWireError.self) { try DNSName(labels: [[]]) }
        #expect(throws: DNSWireError.self) { try DNSName(labels: Array(repeating: [UInt8](repeating: 0x61, count: 63), count: 4)) }
        #expect(throws: Never.self) { try DNSName(labels: Array(repeating: [UInt8](repeating: 0x61, count: 63), count: 3) + [[0x61, 0x61, 0x61, 0x61, 0x61]]) }
    }

    // MARK: hostile packets

    static let header: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0]

    @Test func aPointerToItselfIsRejected() {
        // The answer's name is a pointer to itself (offset 12).
        let bytes = Self.header + [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func aPointerLoopIsRejected() {
        // Name at 12: label "a" then a pointer to 16; at 16: pointer back to 12.
        let bytes = Self.header + [1, 0x61, 0xC0, 16, 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func aForwardPointerIsRejected() {
        let bytes = Self.header + [0xC0, 30, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func aChainOfBackwardPointersEndsAtTheNameLimit() throws {
        // A ladder of 130 names inside an unknown record's data, each one label plus a pointer
        // to the one before: every pointer is valid, and following them stops at the 255-byte
        // name limit rather than at any trust in the packet.
        let ladderStart = 12 + 1 + 10
        var ladder: [UInt8] = [1, 0x61, 0]
        var previous = ladderStart
        for _ in 0..<130 {
            let here = ladderStart + ladder.count
            ladder += [1, 0x62, 0xC0 | UInt8(previous >> 8), UInt8(previous & 0xFF)]
            previous = here
        }
        var bytes: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 2, 0, 0, 0, 0]
        bytes += [0, 0, 99, 0, 1, 0, 0, 0, 10, UInt8(ladder.count >> 8), UInt8(ladder.count & 0xFF)] + ladder
        bytes += [0xC0 | UInt8(previous >> 8), UInt8(previous & 0xFF), 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4]
        #expect {
            try DNSMessage(parsing: bytes)
        } throws: { error in
            guard let error = error as? DNSWireError, case .invalidName(let why) = error else { return false }
            return why.contains("255")
        }
        // The same packet with a shorter ladder (the name fits) parses.
        var short: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 2, 0, 0, 0, 0]
        let shortLadder = Array(ladder.prefix(3 + 4 * 10))
        let top = ladderStart + 3 + 4 * 9
        short += [0, 0, 99, 0, 1, 0, 0, 0, 10, 0, UInt8(shortLadder.count)] + shortLadder
        short += [0xC0, UInt8(top), 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4]
        let parsed = try DNSMessage(parsing: short)
        #expect(parsed.answers[1].name.labels.count == 11)
    }

    @Test func hugeCountsAreRejectedBeforeReading() {
        let bytes: [UInt8] = [0, 0, 0x84, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 40)
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func everyTruncationOfAGoodMessageFailsCleanly() {
        let bytes = Self.response.serialized()
        for end in 0..<bytes.count {
            #expect(throws: DNSWireError.self, "cut at \(end)") { try DNSMessage(parsing: bytes[0..<end]) }
        }
    }

    @Test func recordDataMustMatchItsType() {
        let aOfFive = Self.header + [0, 0, 1, 0, 1, 0, 0, 0, 10, 0, 5, 1, 2, 3, 4, 5]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: aOfFive) }
        let txtOverrun = Self.header + [0, 0, 16, 0, 1, 0, 0, 0, 10, 0, 3, 5, 0x61, 0x62]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: txtOverrun) }
        let lengthPastEnd = Self.header + [0, 0, 99, 0, 1, 0, 0, 0, 10, 0, 50, 1]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: lengthPastEnd) }
        // A PTR whose name runs past its record's data into the next bytes.
        let ptrOverrun = Self.header + [0, 0, 12, 0, 1, 0, 0, 0, 10, 0, 2, 1, 0x61, 0]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: ptrOverrun) }
        let reservedLabel = Self.header + [0x80, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: reservedLabel) }
        let badBitmap = Self.header + [0, 0, 47, 0, 1, 0, 0, 0, 10, 0, 3, 0, 0, 0]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: badBitmap) }
    }

    @Test func oversizedMessagesAreRejected() {
        let bytes = Self.header + [UInt8](repeating: 0, count: DNSMessage.maximumSize)
        #expect(throws: DNSWireError.malformed("\(bytes.count) bytes is above the 9000-byte maximum")) { try DNSMessage(parsing: bytes) }
    }
}
