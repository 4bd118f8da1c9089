#if canImport(Glibc)
import Glibc
#endif

/// CPU time (user and system, all threads) of this process so far: what a role spends in the
/// part it measures, without its start-up.
func processCPUNanoseconds() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let micros = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
    return UInt64(micros) * 1000
}
