import Braid

extension NetworkListener {
    /// Returns once the listener is ready; throws the error it failed with. (A listener whose
    /// states end without either, cancelled first, returns too: the caller's next step fails.)
    func waitUntilReady() async throws {
        for await state in states {
            if state == .ready { return }
            if case .failed(let error) = state { throw error }
        }
    }
}
