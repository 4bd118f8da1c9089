import Foundation

extension NetworkError {
    /// A framer's `markFailed(error:)`: a POSIX code stays one (the classic API reports it as
    /// given); other errors become a protocol error naming them.
    init(framerError error: NWError) {
        if case .posix(let code) = error {
            self = .system(call: "framer", errno: code.rawValue)
        } else {
            self = .protocolError(code: 0, reason: "the framer failed the connection: \(error)", byPeer: false)
        }
    }
}
