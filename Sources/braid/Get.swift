import ArgumentParser
import Braid
import BraidPerf
import Foundation
import HTTPTypes

/// `braid get`: one HTTP/3 GET; prints the body or saves it.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch an https URL over HTTP/3.",
        discussion: """
            Prints the response body to standard output, or saves it with --output. With --json, \
            prints one JSON object instead: status, bytes, the time to the response's end, and \
            whether the request went as 0-RTT data the server accepted. \
            Exit status 0 for a 2xx response, 2 for any other status, 1 if the request failed. \
            The body is held in memory, up to --max-size bytes.
            """)

    @Argument(help: "The URL (https://host[:port]/path).") var url: String
    @Option(name: .shortAndLong, help: "Save the body to this file instead of printing it.") var output: String?
    @Option(help: "Trust the CA certificates in this PEM file (default: the system's).") var ca: String?
    @Flag(help: "Accept any server certificate (testing only).") var insecure = false
    @Option(help: "Server name for SNI and certificate checks (default: the URL's host).") var sni: String?
    @Option(name: .customLong("max-size"), help: "Largest body accepted, in bytes.") var maxSize = 1 << 30
    @Option(help: "Give up after this many seconds.") var timeout = 30.0
    @Flag(help: "Print one JSON object with the status, size and timings.") var json = false
    @Flag(name: .shortAndLong, help: "No progress line (it is drawn on standard error only when that is a terminal).") var quiet = false
    @Option(name: .customLong("session-file"), help: "Resume with, and store, session tickets in this file; the GET goes in 0-RTT when a ticket is there.")
    var sessionFile: String?

    func validate() throws {
        if let ca { _ = try readableFile(ca, flag: "--ca") }
        if ca != nil && insecure { throw ValidationError("--ca and --insecure exclude each other") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        guard maxSize >= 0 else { throw ValidationError("--max-size cannot be negative") }
    }

    func run() async throws {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https", let host = components.host, !host.isEmpty else {
            throw CommandFailure("\(url): not an https URL (HTTP/3 runs over https only)")
        }
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        var stack = QUIC(alpn: ["h3"]).serverName(sni ?? bareHost)
        if let ca { stack = stack.trust(.certificateAuthorities(file: ca)) }
        if insecure { stack = stack.insecureAcceptAnyCertificate() }
        if let sessionFile { stack = stack.sessionCache(try CommandFailure.sessionCache(file: sessionFile)) }
        let authority = components.port.map { "\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\($0)" } ?? host
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        let request = HTTPRequest(method: .get, scheme: "https", authority: authority, path: path)
        let client = HTTP3Client(quic: stack, maximumResponseBodySize: maxSize)
        let progress = ProgressDisplay(quiet: quiet)
        let start = ContinuousClock.now
        progress.start(total: nil)
        let outcome = await CommandFailure.outcome(of: { [maxSize] in try await Self.fetch(request, with: client, upTo: maxSize, progress: progress) }, within: timeout, what: "request")
        await progress.finish()
        let elapsed = ContinuousClock.now - start
        let earlyData = client.earlyData(authority: authority)
        client.close()
        let (body, response): (Data, HTTPResponse)
        switch outcome {
        case .success(let result): (body, response) = result
        case .failure(let error): throw CommandFailure("GET \(url): \(error)")
        }
        if let output {
            do {
                try body.write(to: URL(fileURLWithPath: output))
            } catch {
                throw CommandFailure("--output \(output): \(error.localizedDescription)")
            }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if json {
            printJSON([
                "url": url, "status": response.status.code, "bytes": body.count, "seconds": seconds,
                "goodput_mbit_s": seconds > 0 ? Double(body.count) * 8 / seconds / 1e6 : 0,
                // The GET went before the handshake completed, and the server took it as 0-RTT data.
                "early_data": earlyData.map { $0.accepted && $0.requests > 0 } ?? false,
            ])
        } else if output == nil {
            FileHandle.standardOutput.write(body)
        }
        if response.status.kind != .successful { throw ExitCode(2) }
    }

    /// The response and its body, read as it arrives so the progress line counts it (the
    /// total is the response's content-length, when it has one).
    private static func fetch(_ request: HTTPRequest, with client: HTTP3Client, upTo maximum: Int, progress: ProgressDisplay) async throws -> (Data, HTTPResponse) {
        let (body, response) = try await client.bytes(for: request)
        progress.setTotal(response.headerFields[.contentLength].flatMap { Int($0) })
        var all = Data()
        for try await chunk in body {
            // Dropping the body before its end cancels the request.
            guard all.count + chunk.count <= maximum else {
                throw NetworkError.messageTooLarge(size: all.count + chunk.count, maximum: maximum)
            }
            all.append(chunk)
            progress.add(chunk.count)
        }
        return (all, response)
    }
}
