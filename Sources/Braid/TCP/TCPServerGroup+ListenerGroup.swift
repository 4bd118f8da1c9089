import BraidIO

/// A TLS or TCP listener's sockets: a listening socket per loop (each accepted connection has
/// its own socket).
extension TCPServerGroup: ListenerGroup {}
