#ifndef CBRAID_LOCK_H
#define CBRAID_LOCK_H

#include <stdint.h>

/// Braid's lock word (BraidCore's `Locked`): 0 free, 1 held, 2 held and a thread may sleep on
/// it. A futex lock without priority inheritance: an unlock frees the word and wakes one
/// sleeper, which competes again, so a running thread can take the lock at once (a
/// priority-inheritance unlock hands it to the sleeper instead, and every thread then waits
/// for that one to get a core). A contended lock spins briefly before sleeping, as the
/// holder usually leaves within a few hundred nanoseconds. Debug builds also keep the holder's
/// thread ID, so that taking the lock again on that thread stops with a message instead of
/// hanging.
typedef struct {
    uint32_t word;
    uint32_t owner;
} braid_lock_t;

void braid_lock_acquire(braid_lock_t *lock);
void braid_lock_release(braid_lock_t *lock);

#endif
