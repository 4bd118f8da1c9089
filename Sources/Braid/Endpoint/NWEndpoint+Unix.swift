import BraidIO

extension NWEndpoint {
    /// The socket file of a `.unix(path:)` endpoint, checked (nil for other endpoints); throws
    /// `NetworkError.invalidConfiguration` for a path Linux cannot take.
    var unixSocketPath: UnixSocketPath? {
        get throws {
            guard case .unix(let path) = self else { return nil }
            do {
                return try UnixSocketPath(path)
            } catch {
                let length = path.utf8.count
                if length > UnixSocketPath.maximumLength {
                    throw NetworkError.invalidConfiguration(
                        "the Unix-domain socket path \"\(path)\" is \(length) bytes; Linux takes at most \(UnixSocketPath.maximumLength) (sockaddr_un): use a shorter path, or a relative one from a nearer working directory")
                }
                throw NetworkError.invalidConfiguration("\"\(path)\" is not a Unix-domain socket path (empty, or with a NUL byte)")
            }
        }
    }
}
