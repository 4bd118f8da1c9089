// Braid benchmarks: `swift run -c release benchmarks [--quick] [--filter S] [--json F] [--html F]`,
// and `benchmarks compare A.json B.json [--html F]` to set two runs side by side.
// The same binary also plays the client and server roles of each scenario in child processes
// (`benchmarks role <name> ...`), so every measurement has its two ends in separate processes.
#if canImport(Glibc)
import ArgumentParser
import Glibc
#endif

@main
enum Entry {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "role" {
            exit(await Roles.run(Array(arguments.dropFirst())))
        }
        if arguments.first == "compare" {
            CompareCommand.main(Array(arguments.dropFirst()))
            return
        }
        await BenchmarkCommand.main()
    }
}
