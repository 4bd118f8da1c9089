/// A loop runs tasks that prefer it (`Task(executorPreference: loop)`) on its own thread, in
/// its posted work: a task that waits on the loop's work (a completion the loop resumes) then
/// carries on there without a hop to the global executor's threads and back (a futex wake-up
/// each way). For short tasks that mostly wait on this loop's connections; a task that
/// computes for long holds up every connection of the loop.
extension EventLoop: TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { [self] _ in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}
