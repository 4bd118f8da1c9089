/// Checks UTF-8 (RFC 3629) as it arrives in pieces: a text message's fragments are checked as
/// each arrives, so invalid text fails at its first bad byte rather than at the message's end.
/// Rejects overlong forms, surrogates and code points past U+10FFFF.
package struct UTF8Validator: Sendable {
    /// Continuation bytes still expected for the current code point.
    private var remaining = 0
    /// The range the next continuation byte must fall in (narrower right after some leads).
    private var low: UInt8 = 0x80
    private var high: UInt8 = 0xBF

    package init() {}

    /// Whether every byte so far is valid (a code point may still be incomplete).
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for byte in bytes {
            if remaining == 0 {
                switch byte {
                case 0x00...0x7F: continue
                case 0xC2...0xDF: remaining = 1
                case 0xE0: (remaining, low, high) = (2, 0xA0, 0xBF)
                case 0xE1...0xEC, 0xEE...0xEF: remaining = 2
                case 0xED: (remaining, low, high) = (2, 0x80, 0x9F)
                case 0xF0: (remaining, low, high) = (3, 0x90, 0xBF)
                case 0xF1...0xF3: remaining = 3
                case 0xF4: (remaining, low, high) = (3, 0x80, 0x8F)
                default: return false
                }
            } else {
                guard byte >= low && byte <= high else { return false }
                remaining -= 1
                (low, high) = (0x80, 0xBF)
            }
        }
        return true
    }

    /// Whether the text ended at a code point's boundary.
    package var isComplete: Bool { remaining == 0 }

    /// Whether `bytes` are whole, valid UTF-8.
    package static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var validator = UTF8Validator()
        return validator.feed(bytes) && validator.isComplete
    }
}
