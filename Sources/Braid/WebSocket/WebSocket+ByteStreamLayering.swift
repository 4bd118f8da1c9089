import BraidIO
import BraidWebSocket
import BraidWebSocketIO
import Foundation

/// WebSocket is the TCP binding plus a `WebSocketLayer` over each connection's socket, itself
/// over TLS's layer (`wss`) or a pass-through one (`ws`).
struct WebSocketLayering: UpperLayering {
    let socket: WebSocket
    let tls: TLS?

    /// The upgrade asks for the endpoint's host (with its port unless it is the scheme's
    /// default) and, for a URL, its path and query.
    func clientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer {
        let inner = try innerClientLayer(endpoint: endpoint, remote: remote)
        var configuration = socket.configuration(role: .client)
        configuration.host = Self.hostHeader(endpoint, secure: tls != nil)
        configuration.path = Self.requestTarget(endpoint)
        return WebSocketLayer(engine: WebSocketConnection(configuration: configuration), over: inner)
    }

    func serverLayers() throws -> @Sendable () throws -> any ByteStreamLayer {
        let innerLayers = try innerServerLayers()
        let configuration = socket.configuration(role: .server)
        let answerer = socket.requestHandler?.answer
        return {
            let layer = WebSocketLayer(engine: WebSocketConnection(configuration: configuration), over: try innerLayers())
            layer.requestAnswerer = answerer
            return layer
        }
    }

    static func hostHeader(_ endpoint: NWEndpoint, secure: Bool) -> String {
        let host = endpoint.host
        let name = if case .ipv6 = host { "[\(host)]" } else { host.description }
        let port = endpoint.port.rawValue
        return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
    }

    static func requestTarget(_ endpoint: NWEndpoint) -> String {
        guard case .url(let url) = endpoint, let parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "/" }
        let path = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
        return parts.percentEncodedQuery.map { "\(path)?\($0)" } ?? path
    }
}
