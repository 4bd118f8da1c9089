/// Writes DNS messages, compressing names against the names already written.
struct DNSMessageWriter {
    var bytes: [UInt8] = []
    /// Where each name suffix written so far begins (only offsets a pointer can reach).
    var suffixes: [DNSName: Int] = [:]
    var compressing = true

    /// A record's data as written uncompressed: what RFC 6762 §8.2's tie-break compares.
    static func uncompressedData(_ data: DNSRecordData) -> [UInt8] {
        var writer = DNSMessageWriter()
        writer.compressing = false
        writer.write(DNSResourceRecord(name: .root, ttl: 0, data: data))
        return Array(writer.bytes.dropFirst(11))
    }

    mutating func write(_ message: DNSMessage) {
        var flags: UInt16 = 0
        if message.isResponse { flags |= 0x8000 }
        flags |= UInt16(message.opcode & 0xF) << 11
        if message.isAuthoritative { flags |= 0x0400 }
        if message.isTruncated { flags |= 0x0200 }
        flags |= UInt16(message.rcode & 0xF)
        for value in [message.id, flags, UInt16(message.questions.count), UInt16(message.answers.count),
                      UInt16(message.authorities.count), UInt16(message.additionals.count)] {
            writeUInt16(value)
        }
        for question in message.questions {
            writeName(question.name)
            writeUInt16(question.type.rawValue)
            writeUInt16(question.recordClass & 0x7FFF | (question.unicastResponse ? 0x8000 : 0))
        }
        for record in message.records { write(record) }
    }

    mutating func write(_ record: DNSResourceRecord) {
        writeName(record.name)
        writeUInt16(record.data.type.rawValue)
        writeUInt16(record.recordClass & 0x7FFF | (record.cacheFlush ? 0x8000 : 0))
        writeUInt16(UInt16(record.ttl >> 16))
        writeUInt16(UInt16(record.ttl & 0xFFFF))
        let lengthAt = bytes.count
        writeUInt16(0)
        switch record.data {
        case .a(let address), .aaaa(let address):
            bytes += address
        case .ptr(let target):
            writeName(target)
        case .srv(let priority, let weight, let port, let target):
            writeUInt16(priority)
            writeUInt16(weight)
            writeUInt16(port)
            writeName(target, compress: false)
        case .txt(let strings):
            if strings.isEmpty { bytes.append(0) }
            for string in strings {
                let piece = string.prefix(255)
                bytes.append(UInt8(piece.count))
                bytes += piece
            }
        case .nsec(let next, let types):
            writeName(next, compress: false)
            var windows: [UInt8: [UInt8]] = [:]
            for type in types {
                let window = UInt8(type.rawValue >> 8)
                let low = Int(type.rawValue & 0xFF)
                var map = windows[window] ?? []
                if map.count <= low / 8 { map += [UInt8](repeating: 0, count: low / 8 + 1 - map.count) }
                map[low / 8] |= 0x80 >> UInt8(low % 8)
                windows[window] = map
            }
            for window in windows.keys.sorted() {
                bytes.append(window)
                bytes.append(UInt8(windows[window]!.count))
                bytes += windows[window]!
            }
        case .other(_, let data):
            bytes += data
        }
        let length = bytes.count - lengthAt - 2
        bytes[lengthAt] = UInt8(length >> 8)
        bytes[lengthAt + 1] = UInt8(length & 0xFF)
    }

    mutating func writeName(_ name: DNSName, compress: Bool = true) {
        for index in name.labels.indices {
            let suffix = DNSName(uncheckedLabels: Array(name.labels[index...]))
            if compress, compressing, let at = suffixes[suffix] {
                writeUInt16(0xC000 | UInt16(at))
                return
            }
            if bytes.count < 0x4000, suffixes[suffix] == nil { suffixes[suffix] = bytes.count }
            bytes.append(UInt8(name.labels[index].count))
            bytes += name.labels[index]
        }
        bytes.append(0)
    }

    mutating func writeUInt16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(value & 0xFF))
    }
}
