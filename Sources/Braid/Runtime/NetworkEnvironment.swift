import BraidIO

/// Where connections and listeners made in a task run: by default on the process's event loops
/// (`LoopPool`) over the machine's UDP and TCP sockets. Tests set another, a virtual loop with
/// an in-memory network, for the connections and listeners made inside `withValue`.
package struct NetworkEnvironment: Sendable {
    package let loop: EventLoop
    package let sockets: any DatagramSocketFactory
    package let streamSockets: any ByteStreamSocketFactory

    package init(loop: EventLoop, sockets: any DatagramSocketFactory, streamSockets: any ByteStreamSocketFactory = TCPSockets()) {
        self.loop = loop
        self.sockets = sockets
        self.streamSockets = streamSockets
    }

    /// The environment of the current task (nil: the default).
    @TaskLocal package static var current: NetworkEnvironment?
}
