/// Reads one DNS message from bytes it does not trust. Every read checks the end first; counts
/// are checked against the bytes left before anything is read for them; a compression pointer
/// must point before the label sequence it ends (so following pointers always moves backward
/// and ends), and a name's labels stop at 255 bytes.
struct DNSMessageReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) throws(DNSWireError) {
        guard bytes.count <= DNSMessage.maximumSize else {
            throw .malformed("\(bytes.count) bytes is above the \(DNSMessage.maximumSize)-byte maximum")
        }
        self.bytes = bytes
    }

    mutating func readMessage() throws(DNSWireError) -> DNSMessage {
        guard bytes.count >= 12 else { throw .truncated("a header needs 12 bytes, got \(bytes.count)") }
        let id = try readUInt16()
        let flags = try readUInt16()
        let questionCount = Int(try readUInt16())
        let answerCount = Int(try readUInt16())
        let authorityCount = Int(try readUInt16())
        let additionalCount = Int(try readUInt16())
        // The smallest question is 5 bytes (root name, type, class), the smallest record 11.
        let least = questionCount * 5 + (answerCount + authorityCount + additionalCount) * 11
        guard least <= bytes.count - offset else {
            throw .truncated("the header counts \(questionCount)/\(answerCount)/\(authorityCount)/\(additionalCount) entries, which need at least \(least) bytes; \(bytes.count - offset) follow")
        }
        var message = DNSMessage(
            id: id, isResponse: flags & 0x8000 != 0, isAuthoritative: flags & 0x0400 != 0,
            isTruncated: flags & 0x0200 != 0, opcode: UInt8((flags >> 11) & 0xF), rcode: UInt8(flags & 0xF))
        for _ in 0..<questionCount {
            let name = try readName()
            let type = DNSRecordType(rawValue: try readUInt16())
            let rawClass = try readUInt16()
            message.questions.append(
                DNSQuestion(name: name, type: type, recordClass: rawClass & 0x7FFF, unicastResponse: rawClass & 0x8000 != 0))
        }
        for _ in 0..<answerCount { message.answers.append(try readRecord()) }
        for _ in 0..<authorityCount { message.authorities.append(try readRecord()) }
        for _ in 0..<additionalCount { message.additionals.append(try readRecord()) }
        return message
    }

    mutating func readRecord() throws(DNSWireError) -> DNSResourceRecord {
        let name = try readName()
        let type = DNSRecordType(rawValue: try readUInt16())
        let rawClass = try readUInt16()
        let ttl = UInt32(try readUInt16()) << 16 | UInt32(try readUInt16())
        let length = Int(try readUInt16())
        guard length <= bytes.count - offset else {
            throw .truncated("\(type) record data of \(length) bytes, \(bytes.count - offset) left")
        }
        let end = offset + length
        let data = try readData(type: type, end: end)
        offset = end
        return DNSResourceRecord(name: name, recordClass: rawClass & 0x7FFF, cacheFlush: rawClass & 0x8000 != 0, ttl: ttl, data: data)
    }

    mutating func readData(type: DNSRecordType, end: Int) throws(DNSWireError) -> DNSRecordData {
        let length = end - offset
        switch type {
        case .a:
            guard length == 4 else { throw .malformed("an A record has 4 bytes of data, not \(length)") }
            return .a(Array(bytes[offset..<end]))
        case .aaaa:
            guard length == 16 else { throw .malformed("an AAAA record has 16 bytes of data, not \(length)") }
            return .aaaa(Array(bytes[offset..<end]))
        case .ptr:
            let target = try readName(end: end)
            guard offset == end else { throw .malformed("PTR data continues after its name") }
            return .ptr(target)
        case .srv:
            guard length >= 7 else { throw .malformed("SRV data of \(length) bytes") }
            let priority = try readUInt16()
            let weight = try readUInt16()
            let port = try readUInt16()
            let target = try readName(end: end)
            guard offset == end else { throw .malformed("SRV data continues after its target") }
            return .srv(priority: priority, weight: weight, port: port, target: target)
        case .txt:
            var strings: [[UInt8]] = []
            while offset < end {
                let count = Int(bytes[offset])
                guard count <= end - offset - 1 else { throw .malformed("a TXT string of \(count) bytes runs past its record") }
                strings.append(Array(bytes[offset + 1..<offset + 1 + count]))
                offset += 1 + count
            }
            // RFC 6763 §6.1: one empty string is how an empty TXT record is written.
            if strings == [[]] { strings = [] }
            return .txt(strings)
        case .nsec:
            let next = try readName(end: end)
            var types = Set<DNSRecordType>()
            while offset < end {
                guard end - offset >= 2 else { throw .malformed("an NSEC type bitmap header runs past its record") }
                let window = Int(bytes[offset])
                let count = Int(bytes[offset + 1])
                guard (1...32).contains(count), count <= end - offset - 2 else {
                    throw .malformed("an NSEC type bitmap of \(count) bytes (1 to 32, within the record)")
                }
                for index in 0..<count {
                    let byte = bytes[offset + 2 + index]
                    for bit in 0..<8 where byte & (0x80 >> bit) != 0 {
                        types.insert(DNSRecordType(rawValue: UInt16(window << 8 | index * 8 + bit)))
                    }
                }
                offset += 2 + count
            }
            return .nsec(next: next, types: types)
        default:
            return .other(type: type, bytes: Array(bytes[offset..<end]))
        }
    }

    /// Reads a name at `offset` and moves past it (past its first pointer if it has one). Labels
    /// may not run past `end` (a record's data), though a pointer may lead anywhere before.
    mutating func readName(end: Int? = nil) throws(DNSWireError) -> DNSName {
        let limit = end ?? bytes.count
        var position = offset
        var sequenceStart = offset
        var resume: Int?
        var labels: [[UInt8]] = []
        var wireLength = 1
        while true {
            let currentLimit = resume == nil ? limit : bytes.count
            guard position < currentLimit else { throw .truncated("a name runs past its end") }
            let length = Int(bytes[position])
            switch length >> 6 {
            case 0:
                if length == 0 {
                    offset = resume ?? position + 1
                    return DNSName(uncheckedLabels: labels)
                }
                guard length <= currentLimit - position - 1 else { throw .truncated("a label of \(length) bytes runs past its end") }
                wireLength += 1 + length
                guard wireLength <= DNSName.maximumWireLength else {
                    throw .invalidName("longer than \(DNSName.maximumWireLength) bytes")
                }
                labels.append(Array(bytes[position + 1...position + length]))
                position += 1 + length
            case 3:
                guard position + 1 < currentLimit else { throw .truncated("a compression pointer runs past its end") }
                let target = (length & 0x3F) << 8 | Int(bytes[position + 1])
                guard target < sequenceStart else {
                    throw .invalidName("a compression pointer at \(position) to \(target) does not point before its labels")
                }
                if resume == nil { resume = position + 2 }
                sequenceStart = target
                position = target
            default:
                throw .invalidName("reserved label type \(length >> 6) at \(position)")
            }
        }
    }

    mutating func readUInt16() throws(DNSWireError) -> UInt16 {
        guard offset + 2 <= bytes.count else { throw .truncated("at byte \(offset)") }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }
}
