// libFuzzer's entry point for an HTTP/3 server's handling of a client's streams (see
// tools/fuzz.sh); the work and the checks are in Tests/BraidTests/BraidHTTP3/HTTP3ServerFuzzInput.swift.
import Foundation

@_cdecl("LLVMFuzzerInitialize")
public func http3ServerFuzzInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutableRawPointer) -> CInt {
    // BRAID_FUZZ_WRITE_SEEDS=directory: write the seeds there instead of fuzzing.
    if let directory = ProcessInfo.processInfo.environment["BRAID_FUZZ_WRITE_SEEDS"] {
        for (name, bytes) in HTTP3ServerFuzzInput.seeds() {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes))
        }
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func http3ServerFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    HTTP3ServerFuzzInput.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
