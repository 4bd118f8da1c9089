/// permessage-deflate's negotiation (RFC 7692 §7.1): what a client offers, what a server
/// accepts of an offer, and what a client checks in the answer.
package enum WebSocketDeflateNegotiation {
    /// The extension's name in `Sec-WebSocket-Extensions`.
    package static let name = "permessage-deflate"

    /// What one endpoint asks for and accepts.
    package struct Settings: Sendable, Equatable {
        /// The server starts each message with an empty window (its compressor keeps no
        /// context between messages).
        package var serverNoContextTakeover = false
        /// The same for the client's compressor.
        package var clientNoContextTakeover = false
        /// The largest window the server compresses with, as a power of two (8 to 15).
        package var serverMaxWindowBits = 15
        /// The largest window the client compresses with (8 to 15).
        package var clientMaxWindowBits = 15
        /// zlib's compression level (0 to 9; -1: zlib's default, 6).
        package var compressionLevel = -1
        /// zlib's memory level for the compressor (1 to 9).
        package var memoryLevel = 8

        package init() {}
    }

    /// What both ends agreed for this connection.
    package struct Agreement: Sendable, Equatable {
        package var serverNoContextTakeover = false
        package var clientNoContextTakeover = false
        package var serverMaxWindowBits = 15
        package var clientMaxWindowBits = 15

        package init() {}

        /// Settings taken as agreed, without a negotiation (both ends configured alike).
        package init(settings: Settings) {
            serverNoContextTakeover = settings.serverNoContextTakeover
            clientNoContextTakeover = settings.clientNoContextTakeover
            serverMaxWindowBits = min(max(settings.serverMaxWindowBits, 8), 15)
            clientMaxWindowBits = min(max(settings.clientMaxWindowBits, 8), 15)
        }

        /// Whether the endpoint of `role` compresses each message from an empty window.
        package func sendsWithoutContext(_ role: WebSocketConnection.Role) -> Bool {
            role == .client ? clientNoContextTakeover : serverNoContextTakeover
        }

        /// The window the endpoint of `role` compresses with.
        package func windowBits(of role: WebSocketConnection.Role) -> Int {
            role == .client ? clientMaxWindowBits : serverMaxWindowBits
        }

        /// The response's extension value (server side).
        package var responseValue: String {
            var text = WebSocketDeflateNegotiation.name
            if serverNoContextTakeover { text += "; server_no_context_takeover" }
            if clientNoContextTakeover { text += "; client_no_context_takeover" }
            if serverMaxWindowBits < 15 { text += "; server_max_window_bits=\(serverMaxWindowBits)" }
            if clientMaxWindowBits < 15 { text += "; client_max_window_bits=\(clientMaxWindowBits)" }
            return text
        }
    }

    /// One extension from a `Sec-WebSocket-Extensions` value: its name and parameters
    /// (names lowercased, quoted values unquoted).
    package struct Element: Sendable, Equatable {
        package var name: String
        package var parameters: [Parameter]
    }

    package struct Parameter: Sendable, Equatable {
        package var name: String
        package var value: String?
    }

    /// The client's offer (RFC 7692 §7.1): the settings' requests, and `client_max_window_bits`
    /// always, so a server may bound the client's window.
    package static func offer(_ settings: Settings) -> String {
        var text = name
        if settings.serverNoContextTakeover { text += "; server_no_context_takeover" }
        if settings.clientNoContextTakeover { text += "; client_no_context_takeover" }
        if settings.serverMaxWindowBits < 15 { text += "; server_max_window_bits=\(settings.serverMaxWindowBits)" }
        text += settings.clientMaxWindowBits < 15 ? "; client_max_window_bits=\(settings.clientMaxWindowBits)" : "; client_max_window_bits"
        return text
    }

    /// Parses a `Sec-WebSocket-Extensions` value (RFC 6455 §9.1: extensions separated by
    /// commas, each a token with `;`-separated parameters, a value a token or a quoted
    /// string). Nil when it is malformed.
    package static func parse(_ value: String) -> [Element]? {
        var elements: [Element] = []
        var scanner = Array(value.utf8)[...]
        func skipSpace() { while let byte = scanner.first, byte == 0x20 || byte == 0x09 { scanner.removeFirst() } }
        func token() -> String? {
            let isToken: (UInt8) -> Bool = { byte in
                byte > 0x20 && byte < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains(byte)
            }
            let end = scanner.firstIndex { !isToken($0) } ?? scanner.endIndex
            guard end > scanner.startIndex else { return nil }
            defer { scanner = scanner[end...] }
            return String(decoding: scanner[..<end], as: UTF8.self)
        }
        func quoted() -> String? {
            guard scanner.first == 0x22 else { return nil }
            scanner.removeFirst()
            var bytes: [UInt8] = []
            while let byte = scanner.popFirst() {
                if byte == 0x22 { return String(decoding: bytes, as: UTF8.self) }
                if byte == 0x5C {
                    guard let escaped = scanner.popFirst() else { return nil }
                    bytes.append(escaped)
                } else {
                    bytes.append(byte)
                }
            }
            return nil
        }
        while true {
            skipSpace()
            // Empty list elements (", ,") are allowed and skipped (RFC 9110 §5.6.1).
            if scanner.first == 0x2C {
                scanner.removeFirst()
                continue
            }
            if scanner.isEmpty { break }
            guard let extensionName = token() else { return nil }
            var element = Element(name: extensionName.lowercased(), parameters: [])
            skipSpace()
            while scanner.first == 0x3B {
                scanner.removeFirst()
                skipSpace()
                guard let parameterName = token() else { return nil }
                skipSpace()
                var value: String?
                if scanner.first == 0x3D {
                    scanner.removeFirst()
                    skipSpace()
                    guard let found = scanner.first == 0x22 ? quoted() : token() else { return nil }
                    value = found
                    skipSpace()
                }
                element.parameters.append(Parameter(name: parameterName.lowercased(), value: value))
            }
            elements.append(element)
            guard scanner.isEmpty || scanner.first == 0x2C else { return nil }
        }
        return elements
    }

    /// A permessage-deflate element's parameters, checked (RFC 7692 §7.1): each known at most
    /// once, window bits 8 to 15 without leading zeros, no unknown parameter.
    struct Parameters {
        var serverNoContextTakeover = false
        var clientNoContextTakeover = false
        var serverMaxWindowBits: Int?
        /// Present without a value: `.some(nil)`.
        var clientMaxWindowBits: Int??

        init(_ element: Element) throws(WebSocketError) {
            var seen: Set<String> = []
            for parameter in element.parameters {
                guard seen.insert(parameter.name).inserted else { throw .handshakeFailed("permessage-deflate's \(parameter.name) appeared twice") }
                switch parameter.name {
                case "server_no_context_takeover", "client_no_context_takeover":
                    guard parameter.value == nil else { throw .handshakeFailed("permessage-deflate's \(parameter.name) carried a value") }
                    if parameter.name == "server_no_context_takeover" { serverNoContextTakeover = true } else { clientNoContextTakeover = true }
                case "server_max_window_bits":
                    guard let value = parameter.value else { throw .handshakeFailed("permessage-deflate's server_max_window_bits lacked its value") }
                    serverMaxWindowBits = try Self.windowBits(value)
                case "client_max_window_bits":
                    clientMaxWindowBits = .some(try parameter.value.map { (value) throws(WebSocketError) in try Self.windowBits(value) })
                default:
                    throw .handshakeFailed("permessage-deflate's parameter \(parameter.name) is unknown")
                }
            }
        }

        static func windowBits(_ value: String) throws(WebSocketError) -> Int {
            guard let bits = Int(value), (8...15).contains(bits), String(bits) == value else {
                throw .handshakeFailed("permessage-deflate's window bits \(value) are not 8 to 15")
            }
            return bits
        }
    }

    /// Server: the first permessage-deflate offer in `header` it can accept with `settings`,
    /// and the response's value; nil when it accepts none (the connection then runs
    /// uncompressed). An offer is declined when its parameters are malformed or unknown, and
    /// when the server bounds the client's window but the offer does not let it.
    package static func accept(_ header: String, settings: Settings) -> Agreement? {
        guard let elements = parse(header) else { return nil }
        for element in elements where element.name == name {
            guard let offered = try? Parameters(element) else { continue }
            var agreement = Agreement()
            agreement.serverNoContextTakeover = offered.serverNoContextTakeover || settings.serverNoContextTakeover
            agreement.clientNoContextTakeover = offered.clientNoContextTakeover || settings.clientNoContextTakeover
            agreement.serverMaxWindowBits = min(settings.serverMaxWindowBits, offered.serverMaxWindowBits ?? 15)
            switch offered.clientMaxWindowBits {
            case .none:
                // The client cannot be told a smaller window: decline rather than inflate with
                // a larger one than configured.
                guard settings.clientMaxWindowBits == 15 else { continue }
                agreement.clientMaxWindowBits = 15
            case .some(let bits):
                agreement.clientMaxWindowBits = min(settings.clientMaxWindowBits, bits ?? 15)
            }
            return agreement
        }
        return nil
    }

    /// Client: checks the server's `Sec-WebSocket-Extensions` answer to `offer(settings)`;
    /// returns what was agreed (nil: the server declined).
    package static func validateResponse(_ header: String?, offered settings: Settings?) throws(WebSocketError) -> Agreement? {
        guard let header, !header.allSatisfy({ $0 == " " || $0 == "\t" }) else { return nil }
        guard let elements = parse(header) else { throw .handshakeFailed("the response's Sec-WebSocket-Extensions is malformed (\(header))") }
        guard let settings, elements.count == 1, elements[0].name == name else {
            throw .handshakeFailed("the server chose extensions the client did not offer (\(header))")
        }
        let answer = try Parameters(elements[0])
        var agreement = Agreement()
        agreement.serverNoContextTakeover = answer.serverNoContextTakeover
        guard answer.serverNoContextTakeover || !settings.serverNoContextTakeover else {
            throw .handshakeFailed("the server did not agree to server_no_context_takeover, which the client asked for")
        }
        agreement.clientNoContextTakeover = answer.clientNoContextTakeover || settings.clientNoContextTakeover
        if settings.serverMaxWindowBits < 15 {
            guard let bits = answer.serverMaxWindowBits, bits <= settings.serverMaxWindowBits else {
                throw .handshakeFailed("the server did not agree to server_max_window_bits=\(settings.serverMaxWindowBits)")
            }
        }
        agreement.serverMaxWindowBits = answer.serverMaxWindowBits ?? 15
        switch answer.clientMaxWindowBits {
        case .none:
            agreement.clientMaxWindowBits = settings.clientMaxWindowBits
        case .some(.none):
            throw .handshakeFailed("the server's client_max_window_bits lacked its value")
        case .some(.some(let bits)):
            agreement.clientMaxWindowBits = min(bits, settings.clientMaxWindowBits)
        }
        return agreement
    }
}

