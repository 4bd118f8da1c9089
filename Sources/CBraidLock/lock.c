#define _GNU_SOURCE
#include "CBraidLock.h"

#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

// Spins on a contended lock before sleeping: about what the standard library's Mutex does on
// x86 (1,000 pauses, tens of microseconds), long enough for a holder that is running to
// leave; a holder that lost its core is waited for in the kernel.
enum { spin_limit = 1000 };

static inline void pause_briefly(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void take(braid_lock_t *lock) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(&lock->word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    for (int spin = 0; spin < spin_limit; spin++) {
        if (__atomic_load_n(&lock->word, __ATOMIC_RELAXED) == 0) {
            expected = 0;
            if (__atomic_compare_exchange_n(&lock->word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        }
        pause_briefly();
    }
    // Marked 2 before sleeping, so the holder's release wakes a sleeper. A thread woken here
    // takes the lock as 2 too: it cannot know whether others still sleep, and one wake too
    // many costs a system call where one too few would strand a thread.
    while (__atomic_exchange_n(&lock->word, 2, __ATOMIC_ACQUIRE) != 0) {
        syscall(SYS_futex, &lock->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
}

#ifdef DEBUG
// This thread's ID, read once: gettid is a system call in glibc, and every lock asks for it.
static _Thread_local uint32_t cached_thread_id;

static uint32_t thread_id(void) {
    if (cached_thread_id == 0) cached_thread_id = (uint32_t)gettid();
    return cached_thread_id;
}
#endif

void braid_lock_acquire(braid_lock_t *lock) {
#ifdef DEBUG
    // Only this thread can have stored its own ID here, and it clears it before releasing.
    uint32_t self = thread_id();
    if (__atomic_load_n(&lock->owner, __ATOMIC_RELAXED) == self) {
        fprintf(stderr, "Locked: the lock was taken again on the thread that holds it\n");
        abort();
    }
    take(lock);
    __atomic_store_n(&lock->owner, self, __ATOMIC_RELAXED);
#else
    take(lock);
#endif
}

void braid_lock_release(braid_lock_t *lock) {
#ifdef DEBUG
    __atomic_store_n(&lock->owner, 0, __ATOMIC_RELAXED);
#endif
    if (__atomic_exchange_n(&lock->word, 0, __ATOMIC_RELEASE) == 2) {
        syscall(SYS_futex, &lock->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}
