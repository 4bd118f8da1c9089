// quic-go's perf pair: tools/peers/quic-go-perf (a server and a client on quic-go 0.29 that
// speak Braid's perf exchange), built here with Debian's golang-go and
// golang-github-lucas-clemente-quic-go-dev in GOPATH mode, offline, into .build/peers/. The
// suite's quic-go baseline: the stack a Go user would pick instead.
import BraidPerf
import Foundation

enum QuicGoPerfPair {
    static let source = "tools/peers/quic-go-perf"
    static let gopath = "/usr/share/gocode"
    static let quicGo = gopath + "/src/github.com/lucas-clemente/quic-go"
    static let goCandidates = ["/usr/bin/go", "/usr/lib/go/bin/go"]

    /// The built program, or why there is none (Go or quic-go not installed: the row is left
    /// out with a note; a build that fails throws). Built again when the source is newer.
    static func prepare() async throws -> Result<String, Unavailable> {
        let manager = FileManager.default
        guard let go = goCandidates.first(where: manager.isExecutableFile(atPath:)) else {
            return .failure(Unavailable("Go is not installed (Debian's golang-go)"))
        }
        guard manager.fileExists(atPath: quicGo) else {
            return .failure(Unavailable("quic-go is not installed (Debian's golang-github-lucas-clemente-quic-go-dev)"))
        }
        let root = manager.currentDirectoryPath
        let binary = root + "/.build/peers/quic-go-perf"
        let sourceFile = root + "/" + source + "/main.go"
        if let built = modified(binary), let written = modified(sourceFile), built >= written { return .success(binary) }
        let build = try ChildProcess(
            "/usr/bin/env",
            [
                "GO111MODULE=off", "GOPATH=\(gopath)", "GOCACHE=\(root)/.build/peers/go-cache", "GOFLAGS=", go, "build", "-o", binary,
                "./" + source,
            ])
        let exit = try await build.finish(within: 300)
        guard exit.status == 0 else { throw Unavailable("building \(source) failed: \(build.errors.suffix(600))") }
        return .success(binary)
    }

    /// One download of `bytes` on one stream, in Gbit/s (the client's time from opening its
    /// stream to the last byte: the handshake excluded, as in Braid's rows).
    static func goodput(_ binary: String, bytes: Int) async throws -> Double {
        let server = try ChildProcess(binary, ["server", "--port", "0", "--cert", Bench.certificate, "--key", Bench.key])
        let client: ChildProcess, exit: ChildProcess.Exit
        do {
            let port = try await server.listeningPort()
            client = try ChildProcess(binary, ["client", "--port", String(port), "--bytes", String(bytes), "--ca", Bench.ca])
            exit = try await client.finish(within: 300)
        } catch {
            _ = try? await server.stop()
            throw error
        }
        _ = try? await server.stop()
        guard exit.status == 0, let report = client.jsonLines.last, let seconds = report["seconds"] as? Double, seconds > 0 else {
            throw Unavailable("quic-go perf client exited \(exit.status): \(client.errors.suffix(400))")
        }
        return Double(bytes) * 8 / seconds / 1e9
    }

    private static func modified(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    struct Unavailable: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
