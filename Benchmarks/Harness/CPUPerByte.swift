/// CPU per byte of a one-way bulk transfer, each end by the bytes it handled.
///
/// The sender's CPU is per byte it sent, the receiver's per byte it received, and the total
/// their sum. Per received byte for both (as before 2026-11-27) charged a UDP sender for what
/// the receiver's socket dropped: a faster sender (Braid's `batch`) looked costlier the more
/// it outran the receiver. For TCP and TLS both counts are equal.
enum CPUPerByte {
    static func split(clientCPU: Double, bytesSent: Double, serverCPU: Double, bytesReceived: Double)
        -> (client: Double, server: Double, total: Double)
    {
        let client = clientCPU * 1e9 / bytesSent, server = serverCPU * 1e9 / bytesReceived
        return (client, server, client + server)
    }
}
