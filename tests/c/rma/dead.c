/* dead.c - a process that dies holding passive-target locks: the last rank
 * (the victim) takes an exclusive lock on rank 0 and a shared one on rank 1,
 * writes under the first, tells the others, and kills itself (SIGKILL). The
 * others (the survivors), with MPI_ERRORS_RETURN on the window, ask for
 * exclusive locks on rank 0 then on rank 1 while the victim still holds them:
 * they must get them once it is gone (the locks it held are given back), see
 * its write, and each add one under each lock; then the counts are exact.
 * An operation aimed at the dead rank fails with MPI_ERR_PROC_ABORTED (with
 * argument "strict": it must fail; without, only when this process already
 * knows of the death, which over shared memory it may not).
 * Run under mpirun --disable-auto-cleanup on at least 3 ranks; every survivor
 * prints "OK dead", rank 0 first prints "jobid J". */
#include <signal.h>

#include "../p2p/common.h"

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size, victim = n - 1;
    int strict = argc > 1 && strcmp(argv[1], "strict") == 0;
    CHECKF(n >= 3, "needs 3 ranks, got %d", n);
    if (me == 0) {
        const char *j = getenv("MADMPI_JOBID");
        printf("jobid %s\n", j && *j ? j : "-");
        fflush(stdout);
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm surv;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, me == victim ? MPI_UNDEFINED : 0, me, &surv));
    int *mem = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                            &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    for (int i = 0; i < 4; i++)
        mem[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    int one = 1, v = 100;
    if (me == victim) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        MPI_OK(MPI_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, win));
        MPI_OK(MPI_Win_flush(0, win));
        /* (Synchronous: each notice has reached its survivor before the kill; a
         * standard send may still sit in this process's engine when it returns.) */
        for (int r = 0; r < victim; r++)
            MPI_OK(MPI_Ssend(&v, 1, MPI_INT, r, 7, MPI_COMM_WORLD));
        fflush(stdout);
        raise(SIGKILL);
        return 1;
    }
    /* The victim holds both locks now. */
    MPI_OK(MPI_Recv(&v, 1, MPI_INT, victim, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    int got = -1;
    MPI_OK(MPI_Get(&got, 1, MPI_INT, 0, 0, 1, MPI_INT, win));
    MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_unlock(0, win));
    CHECKF(got == 100, "the victim's put: %d", got);
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
    MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 1, 2, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_unlock(1, win));

    /* An operation aimed at the dead rank (after a barrier: every survivor has
     * polled its transports since the death): it fails (at the lock, the put or
     * the unlock) with MPI_ERR_PROC_ABORTED, or (not strict) succeeds. */
    MPI_OK(MPI_Barrier(surv));
    int rc = MPI_Win_lock(MPI_LOCK_SHARED, victim, 0, win), failed = rc != MPI_SUCCESS, cls;
    if (rc == MPI_SUCCESS) {
        rc = MPI_Put(&one, 1, MPI_INT, victim, 3, 1, MPI_INT, win);
        failed |= rc != MPI_SUCCESS;
        int rc2 = MPI_Win_unlock(victim, win);
        if (rc == MPI_SUCCESS)
            rc = rc2;
        failed |= rc2 != MPI_SUCCESS;
    }
    if (rc != MPI_SUCCESS) {
        MPI_OK(MPI_Error_class(rc, &cls));
        CHECKF(cls == MPI_ERR_PROC_ABORTED, "error class %d for the dead rank", cls);
    }
    CHECKF(failed || !strict, "an operation on the dead rank %d succeeded", victim);

    MPI_OK(MPI_Barrier(surv));
    if (me == 0 || me == 1) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
        int at = me == 0 ? 1 : 2;
        CHECKF(mem[at] == victim, "rank %d: count %d, want %d", me, mem[at], victim);
        MPI_OK(MPI_Win_unlock(me, win));
    }
    MPI_OK(MPI_Barrier(surv));
    /* (The window is not freed: MPI_Win_free is collective over the dead rank too.) */
    MPI_OK(MPI_Comm_free(&surv));
    printf("OK dead\n");
    fflush(stdout);
    MPI_OK(MPI_Finalize());
    return 0;
}
