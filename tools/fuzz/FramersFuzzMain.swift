// libFuzzer's entry point for the framers (see tools/fuzz.sh); the work and the
// checks are in Tests/BraidTests/Framers/FramersFuzzInput.swift.

@_cdecl("LLVMFuzzerTestOneInput")
public func framersFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = FramersFuzzInput.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
