// Preloaded under valgrind by tools/ab/callgrind.sh. valgrind 3.19 (Debian bookworm's) edits the
// signal mask a program passes to sigsuspend in place, and libdispatch's main thread (every Swift
// program with an async main parks it in dispatch_main) passes one in read-only memory: valgrind
// then crashes on its own write. This sigsuspend hands the kernel a writable copy instead.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)8);
}
