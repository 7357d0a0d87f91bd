/* iallreduce_dead.c - a large MPI_Iallreduce with a rank that dies: the last
 * rank (the victim) kills itself (SIGKILL), with argument "before" before it
 * starts its part (the others wait for its addresses), else just after it
 * started it (its addresses sent; the others may be reading its memory, and
 * wait for its last message). With MPI_ERRORS_RETURN, every survivor's
 * MPI_Wait must fail with MPI_ERR_PROC_ABORTED rather than hang; the
 * survivors then still reduce among themselves.
 *
 * Run under mpirun --disable-auto-cleanup on 4 ranks (or 3, 5 ...); every
 * survivor prints "OK iallreduce_dead". */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>

#include "coll.h"

#define COUNT (64L << 10) /* doubles: 512 KiB */

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int before = argc > 1 && strcmp(argv[1], "before") == 0;
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int victim = t_size - 1;
    double *s = xmalloc(sizeof(double) * COUNT), *r = xmalloc(sizeof(double) * COUNT);
    for (long i = 0; i < COUNT; i++)
        s[i] = (double)(t_rank + i % 7);
    /* makes the area, and checks the path works with everyone alive */
    MPI_Request q;
    MPI_OK(MPI_Iallreduce(s, r, (int)COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (long i = 0; i < COUNT; i++)
        CHECKF(r[i] == (double)t_size * (t_size - 1) / 2 + (double)t_size * (double)(i % 7),
               "alive: element %ld: %g", i, r[i]);
    MPI_Comm surv;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, t_rank == victim ? MPI_UNDEFINED : 0, t_rank, &surv));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == victim) {
        if (!before)
            MPI_OK(MPI_Iallreduce(s, r, (int)COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q));
        raise(SIGKILL);
    }
    int rc = MPI_Iallreduce(s, r, (int)COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECKF(rc != MPI_SUCCESS, "MPI_Iallreduce with a dead rank succeeded");
    CHECKF(err_class(rc) == MPI_ERR_PROC_ABORTED, "error class %d, want MPI_ERR_PROC_ABORTED",
           err_class(rc));
    /* the survivors still reduce among themselves */
    int one = 1, all = 0;
    MPI_OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, surv));
    CHECKF(all == t_size - 1, "survivors: %d", all);
    MPI_OK(MPI_Comm_free(&surv));
    printf("OK iallreduce_dead\n");
    fflush(stdout);
    free(s);
    free(r);
    MPI_OK(MPI_Finalize());
    return 0;
}
