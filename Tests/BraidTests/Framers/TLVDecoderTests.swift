import BraidFramers
import Foundation
import Testing

/// The sans-IO TLV framing: encoding, decoding from pieces split anywhere, hostile headers,
/// and the Coder decode path.
@Suite struct TLVDecoderTests {
    /// A few messages of different types and sizes, including an empty value.
    static let messages = [
        TLVMessage(type: 1, value: Data("hello".utf8)),
        TLVMessage(type: 0, value: Data()),
        TLVMessage(type: 0xFFFF_FFFF, value: Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) })),
        TLVMessage(type: 42, value: Data([0])),
    ]

    static var wire: [UInt8] {
        messages.flatMap { try! TLVEncoder.encode(type: $0.type, value: $0.value) }
    }

    /// Feeds `pieces` in order and returns every message decoded.
    static func decode(
        _ pieces: [ArraySlice<UInt8>], maximum: Int = TLVFraming.defaultMaximumMessageSize, sharingStorage: Bool = false
    ) throws -> [TLVMessage] {
        var decoder = TLVDecoder(maximumMessageSize: maximum)
        var out: [TLVMessage] = []
        for piece in pieces {
            decoder.append(piece)
            while let message = try decoder.next(sharingStorage: sharingStorage) { out.append(message) }
        }
        #expect(decoder.isAtMessageBoundary)
        return out
    }

    @Test func theHeaderIsTypeThenLengthBigEndian() throws {
        #expect(TLVEncoder.header(type: 0x0102_0304, length: 0x0A0B_0C0D) == [1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D])
        #expect(try TLVEncoder.encode(type: 7, value: [0x68, 0x69]) == [0, 0, 0, 7, 0, 0, 0, 2, 0x68, 0x69])
    }

    @Test func wholeStreamDecodesInOnePiece() throws {
        let wire = Self.wire
        #expect(try Self.decode([wire[...]]) == Self.messages)
    }

    /// `TLVEncoder.write` (what a send queues) makes the bytes `encode` makes, from a `Data`,
    /// an array, a slice and a collection with no contiguous storage.
    @Test func writeMakesTheBytesEncodeMakes() throws {
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let expected = try TLVEncoder.encode(type: 0xA1B2_C3D4, value: bytes)
        func written(_ value: some Collection<UInt8>) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: TLVFraming.headerSize + value.count) { buffer, count in
                TLVEncoder.write(value, type: 0xA1B2_C3D4, length: UInt32(value.count), into: UnsafeMutableRawBufferPointer(buffer))
                count = buffer.count
            }
        }
        #expect(written(Data(bytes)) == expected)
        #expect(written(bytes) == expected)
        #expect(written(Data([9, 9] + bytes)[2...]) == expected)
        #expect(written(bytes.lazy.map { $0 }) == expected)
        #expect(written(EmptyCollection()) == TLVEncoder.header(type: 0xA1B2_C3D4, length: 0))
    }

    /// Every single split point of the whole stream, and every byte on its own; values copied
    /// or (`sharingStorage`) slices of the pieces.
    @Test(arguments: [false, true]) func everySplitPointDecodes(sharingStorage: Bool) throws {
        let wire = Self.wire
        for split in 0...wire.count {
            #expect(try Self.decode([wire[..<split], wire[split...]], sharingStorage: sharingStorage) == Self.messages, "split at \(split)")
        }
        #expect(try Self.decode(wire.indices.map { wire[$0...$0] }, sharingStorage: sharingStorage) == Self.messages)
    }

    /// Every pair of split points of a two-message stream (three pieces).
    @Test func everyPairOfSplitPointsDecodes() throws {
        let messages = Array(Self.messages.prefix(2)) + [TLVMessage(type: 9, value: Data("abcdefghij".utf8))]
        let wire = messages.flatMap { try! TLVEncoder.encode(type: $0.type, value: $0.value) }
        for first in 0...wire.count {
            for second in first...wire.count {
                #expect(try Self.decode([wire[..<first], wire[first..<second], wire[second...]]) == messages)
            }
        }
    }

    /// A value fed as a piece of its own (its header before it) is that piece, not a copy,
    /// however small.
    @Test(arguments: [false, true]) func aValueFedAsItsOwnPieceIsHandedOn(sharingStorage: Bool) throws {
        var decoder = TLVDecoder()
        let value = Data((0..<100).map { UInt8($0) })
        decoder.append(Data(try TLVEncoder.encode(type: 9, value: value).prefix(TLVFraming.headerSize)))
        decoder.append(value)
        let message = try #require(try decoder.next(sharingStorage: sharingStorage))
        #expect(message.type == 9 && message.value == value)
        let same = value.withUnsafeBytes { piece in message.value.withUnsafeBytes { $0.baseAddress == piece.baseAddress } }
        #expect(same)
        #expect(decoder.isAtMessageBoundary)
    }

    @Test func bytesNeededCountsDownToTheMessage() throws {
        var decoder = TLVDecoder()
        #expect(decoder.bytesNeeded == 8)
        decoder.append([0, 0, 0, 1, 0, 0])
        #expect(decoder.bytesNeeded == 2)
        decoder.append([0, 3, 0xAA])
        #expect(decoder.bytesNeeded == 2)
        #expect(try decoder.next() == nil)
        decoder.append([0xBB, 0xCC])
        #expect(decoder.bytesNeeded == 0)
        #expect(try decoder.next() == TLVMessage(type: 1, value: Data([0xAA, 0xBB, 0xCC])))
        #expect(decoder.bytesNeeded == 8)
    }

    @Test func aMessageOfExactlyTheMaximumIsAccepted() throws {
        let wire = try TLVEncoder.encode(type: 3, value: [UInt8](repeating: 5, count: 100))
        #expect(try Self.decode([wire[...]], maximum: 100).count == 1)
    }

    /// A header announcing one byte more than the maximum throws as soon as its 8 bytes are
    /// here, and the decoder stays failed.
    @Test func aHeaderAboveTheMaximumThrowsAtOnceAndForGood() throws {
        var decoder = TLVDecoder(maximumMessageSize: 100)
        decoder.append(TLVEncoder.header(type: 3, length: 101).prefix(7))
        #expect(try decoder.next() == nil)
        decoder.append([101])
        #expect(decoder.bytesNeeded == 0)
        #expect(throws: TLVFramingError.messageTooLarge(type: 3, size: 101, maximum: 100)) { try decoder.next() }
        decoder.append(TLVEncoder.header(type: 1, length: 0))
        #expect(throws: TLVFramingError.messageTooLarge(type: 3, size: 101, maximum: 100)) { try decoder.next() }
    }

    /// A 4 GiB announcement with the default maximum: rejected with nothing but the header held.
    @Test func aFourGigabyteAnnouncementAllocatesNothing() throws {
        var decoder = TLVDecoder()
        decoder.append(TLVEncoder.header(type: 0, length: UInt32.max))
        #expect(decoder.bufferedByteCount == 8)
        #expect(throws: TLVFramingError.messageTooLarge(type: 0, size: UInt64(UInt32.max), maximum: 16 << 20)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
    }

    /// A legal but large announcement holds only the bytes that arrived.
    @Test func aLargeAnnouncementHoldsOnlyWhatArrived() throws {
        var decoder = TLVDecoder()
        decoder.append(TLVEncoder.header(type: 0, length: 16 << 20))
        decoder.append([1, 2, 3])
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 11)
        #expect(decoder.bytesNeeded == (16 << 20) - 3)
    }

    @Test func aZeroMaximumAcceptsOnlyEmptyValues() throws {
        var decoder = TLVDecoder(maximumMessageSize: 0)
        decoder.append(TLVEncoder.header(type: 5, length: 0))
        #expect(try decoder.next() == TLVMessage(type: 5, value: Data()))
        decoder.append(TLVEncoder.header(type: 5, length: 1))
        #expect(throws: TLVFramingError.self) { try decoder.next() }
    }

    /// Many messages through one decoder in pieces that never line up with them: the
    /// decoder's buffer compaction keeps every byte.
    @Test func manyMessagesInOddPiecesStayIntact() throws {
        var wire: [UInt8] = []
        var expected: [TLVMessage] = []
        for index in 0..<500 {
            let value = Data((0..<(index * 37 % 2000)).map { UInt8(truncatingIfNeeded: $0 &+ index) })
            expected.append(TLVMessage(type: UInt32(index), value: value))
            wire += try TLVEncoder.encode(type: UInt32(index), value: value)
        }
        var pieces: [ArraySlice<UInt8>] = []
        var offset = 0
        var size = 1
        while offset < wire.count {
            let end = min(wire.count, offset + size)
            pieces.append(wire[offset..<end])
            offset = end
            size = size * 3 % 4099 + 1
        }
        #expect(try Self.decode(pieces) == expected)
    }

    /// Values taken from appended `Data` pieces without a copy, or with one: each is indexed
    /// from 0 and keeps its bytes after the decoder and the pieces are gone. A piece that is
    /// itself a slice (its indices not starting at 0) decodes the same.
    @Test func valuesFromDataPiecesAreWholeAndOwnTheirBytes() throws {
        let large = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let small = Data("small".utf8)
        var wire = Data([0xEE, 0xEE])  // sliced off below
        wire.append(contentsOf: try TLVEncoder.encode(type: 1, value: large))
        wire.append(contentsOf: try TLVEncoder.encode(type: 2, value: small))
        wire.append(contentsOf: try TLVEncoder.encode(type: 3, value: large))
        var values: [TLVMessage] = []
        do {
            var decoder = TLVDecoder()
            let sliced = wire[2...]
            #expect(sliced.startIndex == 2)
            // The last message split across two pieces: gathered into a copy.
            let cut = sliced.endIndex - 5000
            decoder.append(Data(sliced[..<cut]))
            decoder.append(sliced[cut...])
            while let message = try decoder.next() { values.append(message) }
            #expect(decoder.isAtMessageBoundary)
        }
        wire.resetBytes(in: wire.indices)
        #expect(values.map(\.type) == [1, 2, 3])
        #expect(values.map(\.value) == [large, small, large])
        #expect(values.allSatisfy { $0.value.startIndex == 0 })
        #expect(values[0].value[0] == large[0] && values[2].value[9_999] == large[9_999])
    }

    /// `sharingStorage`: a value within one piece is a slice of it (indices where it lies),
    /// small ones too, and keeps its bytes after the decoder is gone; one split across pieces
    /// is still gathered into a value of its own.
    @Test func sharedValuesAreSlicesOfTheirPiece() throws {
        let small = Data("small".utf8), large = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        var wire = Data(try TLVEncoder.encode(type: 1, value: small))
        wire.append(contentsOf: try TLVEncoder.encode(type: 2, value: large))
        wire.append(contentsOf: try TLVEncoder.encode(type: 3, value: small))
        let cut = wire.count - 3
        var values: [TLVMessage] = []
        do {
            var decoder = TLVDecoder()
            decoder.append(Data(wire[..<cut]))
            decoder.append(Data(wire[cut...]))
            while let message = try decoder.next(sharingStorage: true) { values.append(message) }
            #expect(decoder.isAtMessageBoundary)
        }
        #expect(values.map(\.type) == [1, 2, 3])
        #expect(values.map(\.value) == [small, large, small])
        #expect(values[0].value.startIndex == TLVFraming.headerSize)
        #expect(values[1].value.startIndex == 2 * TLVFraming.headerSize + small.count)
        #expect(values[2].value.startIndex == 0)
    }
}

/// The Coder decode path under the framing.
@Suite struct CoderFramingTests {
    enum GameMessage: Codable, Equatable {
        case move(row: Int, column: Int)
        case resign
    }

    @Test func jsonAndPropertyListRoundTrip() throws {
        for value in [GameMessage.move(row: 1, column: 2), .resign] {
            let json = try CoderFraming.encode(value, using: .json)
            #expect(try CoderFraming.decode(GameMessage.self, from: TLVMessage(type: 0, value: json), using: .json) == value)
            let plist = try CoderFraming.encode(value, using: .propertyList)
            #expect(try CoderFraming.decode(GameMessage.self, from: TLVMessage(type: 0, value: plist), using: .propertyList) == value)
        }
    }

    @Test func garbageIsATypedErrorNamingTheTypeAndTheReason() throws {
        do {
            _ = try CoderFraming.decode(GameMessage.self, from: TLVMessage(type: 0, value: Data("{\"move\": 3}".utf8)), using: .json)
            Issue.record("decoded garbage")
        } catch .decodingFailed(let type, let reason) {
            #expect(type.hasSuffix("GameMessage"))
            #expect(!reason.isEmpty)
        } catch {
            Issue.record("wrong error \(error)")
        }
    }

    @Test func aMessageOfAnotherTypeDoesNotDecode() throws {
        let json = try CoderFraming.encode(GameMessage.resign, using: .json)
        #expect(throws: CoderFramingError.self) {
            try CoderFraming.decode(GameMessage.self, from: TLVMessage(type: 1, value: json), using: .json)
        }
    }
}
