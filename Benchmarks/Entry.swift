// Braid benchmarks: `swift run -c release benchmarks [--quick] [--filter S] [--json F] [--html F]`.
// The same binary also plays the client and server roles of each scenario in child processes
// (`benchmarks role <name> ...`), so every measurement has its two ends in separate processes.
#if canImport(Glibc)
import Glibc
#endif

@main
enum Entry {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "role" {
            exit(await Roles.run(Array(arguments.dropFirst())))
        }
        await BenchmarkCommand.main()
    }
}
