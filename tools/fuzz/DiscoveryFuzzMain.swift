// libFuzzer's entry point for the DNS message parser and the mDNS engines (see tools/fuzz.sh);
// the work and the checks are in Tests/BraidTests/BraidDiscovery/DiscoveryFuzzInput.swift.
import Foundation

@_cdecl("LLVMFuzzerInitialize")
public func discoveryFuzzInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutableRawPointer) -> CInt {
    // BRAID_FUZZ_WRITE_SEEDS=directory: write the seeds there instead of fuzzing.
    if let directory = ProcessInfo.processInfo.environment["BRAID_FUZZ_WRITE_SEEDS"] {
        for (name, bytes) in DiscoveryFuzzInput.seeds() {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes))
        }
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func discoveryFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = DiscoveryFuzzInput.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
