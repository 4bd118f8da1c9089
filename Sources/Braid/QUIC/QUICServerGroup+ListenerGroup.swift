import BraidIO
import BraidQUICIO

/// A QUIC listener's sockets: one per loop, shared by all the loop's connections.
extension QUICServerGroup: ListenerGroup {
    var sharedSocketStatistics: SocketCounters? {
        get async {
            var total = SocketCounters()
            for driver in drivers {
                guard let counters = try? await driver.loop.submit({ _ in driver.value.socket.counters }) else { continue }
                total = total + counters
            }
            return total
        }
    }

    var listenerStatistics: ListenerStatistics? {
        get async { await ListenerStatistics(summing: self) }
    }
}
