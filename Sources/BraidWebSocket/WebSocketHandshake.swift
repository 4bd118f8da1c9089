import CBraid
import Foundation

/// The opening handshake's two messages (RFC 6455 §4): the client's upgrade request and the
/// server's 101 response, written and checked.
package enum WebSocketHandshake {
    /// The GUID the accept key is derived with (RFC 6455 §1.3).
    private static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a client's key: base64 of the SHA-1 of key and GUID.
    package static func acceptValue(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        let rc = input.withUnsafeBytes { source in
            digest.withUnsafeMutableBytes { gnutls_hash_fast(GNUTLS_DIG_SHA1, source.baseAddress, source.count, $0.baseAddress) }
        }
        // SHA-1 from GnuTLS cannot fail short of memory corruption; an empty accept value would
        // fail the handshake safely anyway.
        guard rc == 0 else { return "" }
        return Data(digest).base64EncodedString()
    }

    /// A fresh client key: 16 random bytes, base64.
    package static func makeKey(random: (inout [UInt8]) -> Void) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        random(&bytes)
        return Data(bytes).base64EncodedString()
    }

    /// The client's request for `path` on `host` (with its port when not the scheme's default).
    package static func request(
        host: String, path: String, key: String, subprotocols: [String], additionalHeaders: [(name: String, value: String)]
    ) -> [UInt8] {
        var text = "GET \(path.isEmpty ? "/" : path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if !subprotocols.isEmpty { text += "Sec-WebSocket-Protocol: \(subprotocols.joined(separator: ", "))\r\n" }
        for header in additionalHeaders { text += "\(header.name): \(header.value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// Checks the server's response to a request sent with `key`; returns the subprotocol it
    /// chose (nil: none) and the permessage-deflate agreement (nil: none; `deflate` is what
    /// the client offered, nil when it offered no extension).
    package static func validateResponse(
        _ head: HTTPUpgradeHead, key: String, offered: [String], deflate: WebSocketDeflateNegotiation.Settings? = nil
    ) throws(WebSocketError) -> (subprotocol: String?, deflate: WebSocketDeflateNegotiation.Agreement?) {
        let status = head.startLine.split(separator: " ", maxSplits: 2)
        guard status.count >= 2, status[0].hasPrefix("HTTP/1.") else { throw .handshakeFailed("the server did not answer with HTTP/1.1") }
        guard status[1] == "101" else { throw .handshakeFailed("the server answered \(head.startLine) instead of 101 Switching Protocols") }
        guard head.hasToken("websocket", in: "upgrade") else { throw .handshakeFailed("the response lacks Upgrade: websocket") }
        guard head.hasToken("upgrade", in: "connection") else { throw .handshakeFailed("the response lacks Connection: Upgrade") }
        guard head.value("sec-websocket-accept") == acceptValue(forKey: key) else {
            throw .handshakeFailed("the response's Sec-WebSocket-Accept does not match the key sent")
        }
        let agreement = try WebSocketDeflateNegotiation.validateResponse(head.value("sec-websocket-extensions"), offered: deflate)
        guard let chosen = head.value("sec-websocket-protocol") else { return (nil, agreement) }
        guard offered.contains(chosen) else { throw .handshakeFailed("the server chose subprotocol \(chosen), which the client did not offer") }
        return (chosen, agreement)
    }

    /// What a server decided about a request.
    package struct ServerDecision: Sendable {
        /// The bytes to send: a 101 response, or an error response when `failure` is set.
        package let response: [UInt8]
        /// The subprotocol chosen.
        package let subprotocol: String?
        /// The permessage-deflate offer accepted (nil: none).
        package var deflate: WebSocketDeflateNegotiation.Agreement?
        /// Why the request was refused (nil: accepted).
        package let failure: WebSocketError?
    }

    /// Checks a client's request and answers it: a subprotocol is chosen as the first of the
    /// client's that `supported` lists.
    package static func answer(
        _ head: HTTPUpgradeHead, supported: [String], additionalHeaders: [(name: String, value: String)],
        deflate: WebSocketDeflateNegotiation.Settings? = nil
    ) -> ServerDecision {
        if let refusal = refusal(of: head) { return refusal }
        let chosen = offeredSubprotocols(head).first { supported.contains($0) }
        return accept(head, subprotocol: chosen, additionalHeaders: additionalHeaders, deflate: deflate)
    }

    /// An error response and its failure when `head` is not a WebSocket upgrade request Braid
    /// serves; nil when it is.
    package static func refusal(of head: HTTPUpgradeHead) -> ServerDecision? {
        let request = head.startLine.split(separator: " ")
        guard request.count == 3, request[0] == "GET", request[2].hasPrefix("HTTP/1.") else {
            return refuse("400 Bad Request", "the request line is not GET ... HTTP/1.1")
        }
        guard head.value("host") != nil else { return refuse("400 Bad Request", "the request lacks Host") }
        guard head.hasToken("websocket", in: "upgrade"), head.hasToken("upgrade", in: "connection") else {
            return refuse("400 Bad Request", "the request is not a WebSocket upgrade")
        }
        guard head.value("sec-websocket-version") == "13" else {
            return refuse("426 Upgrade Required", "the client asked for another WebSocket version", extra: "Sec-WebSocket-Version: 13\r\n")
        }
        guard let key = head.value("sec-websocket-key"), Data(base64Encoded: key)?.count == 16 else {
            return refuse("400 Bad Request", "the request's Sec-WebSocket-Key is not 16 bytes in base64")
        }
        return nil
    }

    /// An error response with `status`, failing the connection with `reason`.
    package static func refuse(_ status: String, _ reason: String, extra: String = "") -> ServerDecision {
        let body = "HTTP/1.1 \(status)\r\nConnection: close\r\nContent-Length: 0\r\n\(extra)\r\n"
        return ServerDecision(response: Array(body.utf8), subprotocol: nil, deflate: nil, failure: .handshakeFailed(reason))
    }

    /// The subprotocols a request offers, in its order (`Sec-WebSocket-Protocol`).
    package static func offeredSubprotocols(_ head: HTTPUpgradeHead) -> [String] {
        (head.value("sec-websocket-protocol") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    /// The 101 response to a request `refusal(of:)` passed, with `subprotocol` (which the
    /// request offers, or nil) and permessage-deflate when both ends want it.
    package static func accept(
        _ head: HTTPUpgradeHead, subprotocol chosen: String?, additionalHeaders: [(name: String, value: String)],
        deflate: WebSocketDeflateNegotiation.Settings?
    ) -> ServerDecision {
        let key = head.value("sec-websocket-key") ?? ""
        var text = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Accept: \(acceptValue(forKey: key))\r\n"
        if let chosen { text += "Sec-WebSocket-Protocol: \(chosen)\r\n" }
        let agreement = deflate.flatMap { settings in
            head.value("sec-websocket-extensions").flatMap { WebSocketDeflateNegotiation.accept($0, settings: settings) }
        }
        if let agreement { text += "Sec-WebSocket-Extensions: \(agreement.responseValue)\r\n" }
        for header in additionalHeaders { text += "\(header.name): \(header.value)\r\n" }
        return ServerDecision(response: Array((text + "\r\n").utf8), subprotocol: chosen, deflate: agreement, failure: nil)
    }
}
