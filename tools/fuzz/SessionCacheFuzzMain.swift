// libFuzzer's entry point for the session-cache file format (see tools/fuzz.sh); the work and
// the checks are in Tests/BraidTests/Braid/SessionCacheFuzzInput.swift.
import Foundation

/// The test certificates beside this file's repository.
let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Tests/BraidTests/Fixtures").path
nonisolated(unsafe) let harness = try! SessionCacheFuzzInput(fixtures: fixtures)

@_cdecl("LLVMFuzzerInitialize")
public func sessionCacheFuzzInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutableRawPointer) -> CInt {
    // BRAID_FUZZ_WRITE_SEEDS=directory: write the seeds there instead of fuzzing.
    if let directory = ProcessInfo.processInfo.environment["BRAID_FUZZ_WRITE_SEEDS"] {
        for (name, bytes) in try! harness.seeds(fixtures: fixtures) {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes))
        }
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func sessionCacheFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = harness.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
