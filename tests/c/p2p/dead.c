/* dead.c - point-to-point operations with a rank that dies: the last rank (the
 * victim) waits until every other rank (a survivor) is about to block in an
 * operation that only it could complete, then kills itself (SIGKILL). Each
 * survivor blocks in one way, chosen by its rank modulo 8 (9 ranks try them
 * all): MPI_Recv from the victim; MPI_Wait on an MPI_Irecv from it;
 * MPI_Waitany over that and a receive from a survivor that never sends;
 * MPI_Probe; a rendezvous-size MPI_Send to it (1 MiB, never received);
 * MPI_Recv from MPI_ANY_SOURCE on MPI_COMM_WORLD; MPI_Test and MPI_Iprobe in
 * polling loops. With MPI_ERRORS_RETURN each must fail with
 * MPI_ERR_PROC_ABORTED. Then every survivor checks the operations begun after
 * the death (receives, probes and sends with the victim, MPI_ANY_SOURCE on
 * MPI_COMM_WORLD: MPI_ERR_PROC_ABORTED) and that the survivors still talk (a
 * ring on their own communicator, with MPI_ANY_SOURCE, and on MPI_COMM_WORLD).
 *
 * With argument "fatal" the error handler stays MPI_ERRORS_ARE_FATAL and
 * every survivor blocks in MPI_Recv from the victim: the job must end with a
 * message naming the call and the dead rank.
 *
 * Run under mpirun --disable-auto-cleanup on at least 3 ranks; every survivor
 * prints "OK dead", rank 0 first prints "jobid J". */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <time.h>

#include "common.h"

#define TAG_READY 1
#define TAG_NEVER 2
#define TAG_RING 3
#define BIG (1 << 20)

enum {
    BLOCK_RECV,
    BLOCK_WAIT,
    BLOCK_WAITANY,
    BLOCK_PROBE,
    BLOCK_SEND_RDV,
    BLOCK_ANY_SOURCE,
    BLOCK_TEST,
    BLOCK_IPROBE,
    NBLOCK
};

static const char *const block_name[NBLOCK] = {
    "MPI_Recv", "MPI_Wait", "MPI_Waitany", "MPI_Probe",
    "MPI_Send (rendezvous)", "MPI_Recv (MPI_ANY_SOURCE)", "MPI_Test loop", "MPI_Iprobe loop"};

/* `rc` (of `what`) failed with MPI_ERR_PROC_ABORTED. */
static void aborted(int rc, const char *what)
{
    CHECKF(rc != MPI_SUCCESS, "%s succeeded", what);
    int cls = err_class(rc);
    CHECKF(cls == MPI_ERR_PROC_ABORTED, "%s: error class %d, want MPI_ERR_PROC_ABORTED (%d)",
           what, cls, MPI_ERR_PROC_ABORTED);
}

/* Block in the way `how` on an operation only the victim could complete; the
 * victim is told just before (`ready`). Returns the failing call's code. */
static int block(int how, int victim, int *ready)
{
    static char big[BIG];
    int v = 0, flag = 0, idx = -1;
    MPI_Status st;
    MPI_Request req = MPI_REQUEST_NULL, reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc;
    switch (how) {
    case BLOCK_WAIT:
    case BLOCK_TEST:
        MPI_OK(MPI_Irecv(&v, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD, &req));
        break;
    case BLOCK_WAITANY:
        /* (From a survivor that never sends with that tag: only the victim's can fail.) */
        MPI_OK(MPI_Irecv(&v, 1, MPI_INT, t_rank == 0 ? 1 : 0, TAG_NEVER, MPI_COMM_WORLD,
                         &reqs[0]));
        MPI_OK(MPI_Irecv(&flag, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD, &reqs[1]));
        break;
    }
    MPI_OK(MPI_Send(ready, 1, MPI_INT, victim, TAG_READY, MPI_COMM_WORLD));
    switch (how) {
    case BLOCK_RECV:
        return MPI_Recv(&v, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD, &st);
    case BLOCK_WAIT:
        rc = MPI_Wait(&req, &st);
        CHECKF(req == MPI_REQUEST_NULL, "the failed request is freed");
        return rc;
    case BLOCK_WAITANY:
        rc = MPI_Waitany(2, reqs, &idx, &st);
        CHECKF(idx == 1, "MPI_Waitany completed index %d, want 1", idx);
        MPI_OK(MPI_Cancel(&reqs[0]));
        MPI_OK(MPI_Wait(&reqs[0], &st));
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECKF(flag, "the other receive is cancelled");
        return rc;
    case BLOCK_PROBE:
        return MPI_Probe(victim, TAG_NEVER, MPI_COMM_WORLD, &st);
    case BLOCK_SEND_RDV:
        return MPI_Send(big, BIG, MPI_BYTE, victim, TAG_NEVER, MPI_COMM_WORLD);
    case BLOCK_ANY_SOURCE:
        return MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &st);
    case BLOCK_TEST:
        do
            rc = MPI_Test(&req, &flag, &st);
        while (rc == MPI_SUCCESS && !flag);
        return rc;
    case BLOCK_IPROBE:
        do
            rc = MPI_Iprobe(victim, TAG_NEVER, MPI_COMM_WORLD, &flag, &st);
        while (rc == MPI_SUCCESS && !flag);
        return rc;
    }
    return MPI_SUCCESS;
}

/* Operations begun after the death: those with the victim fail, the others work. */
static void after(int victim, MPI_Comm surv)
{
    int v = 0, flag = 0, rc;
    MPI_Status st;
    MPI_Request req;
    aborted(MPI_Recv(&v, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD, &st), "a later MPI_Recv");
    rc = MPI_Irecv(&v, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, &st);
    aborted(rc, "a later MPI_Irecv + MPI_Wait");
    aborted(MPI_Probe(victim, TAG_NEVER, MPI_COMM_WORLD, &st), "a later MPI_Probe");
    aborted(MPI_Iprobe(victim, TAG_NEVER, MPI_COMM_WORLD, &flag, &st), "a later MPI_Iprobe");
    aborted(MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &flag, &st),
            "a later MPI_Iprobe (MPI_ANY_SOURCE)");
    aborted(MPI_Send(&v, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD), "a later MPI_Send");
    rc = MPI_Isend(&v, 1, MPI_INT, victim, TAG_NEVER, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, &st);
    aborted(rc, "a later MPI_Isend + MPI_Wait");
    aborted(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &st),
            "a later MPI_Recv (MPI_ANY_SOURCE)");

    /* The survivors still talk: a ring on their communicator, from MPI_ANY_SOURCE
     * (the victim is not a member), and one on MPI_COMM_WORLD from a named rank. */
    int me, n;
    MPI_OK(MPI_Comm_rank(surv, &me));
    MPI_OK(MPI_Comm_size(surv, &n));
    int right = (me + 1) % n, left = (me + n - 1) % n, got = -1;
    MPI_OK(MPI_Sendrecv(&me, 1, MPI_INT, right, TAG_RING, &got, 1, MPI_INT, MPI_ANY_SOURCE,
                        TAG_RING, surv, &st));
    CHECKF(got == left && st.MPI_SOURCE == left, "ring on the survivors: %d from %d, want %d",
           got, st.MPI_SOURCE, left);
    int wme = t_rank, wright = (t_rank + 1) % victim, wleft = (t_rank + victim - 1) % victim;
    MPI_OK(MPI_Sendrecv(&wme, 1, MPI_INT, wright, TAG_RING, &got, 1, MPI_INT, wleft, TAG_RING,
                        MPI_COMM_WORLD, &st));
    CHECKF(got == wleft, "ring on MPI_COMM_WORLD: %d, want %d", got, wleft);
}

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size, victim = n - 1;
    int fatal = argc > 1 && strcmp(argv[1], "fatal") == 0;
    CHECKF(n >= 3, "needs 3 ranks, got %d", n);
    if (me == 0) {
        const char *j = getenv("MADMPI_JOBID");
        printf("jobid %s\n", j && *j ? j : "-");
        fflush(stdout);
    }
    MPI_Comm surv;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, me == victim ? MPI_UNDEFINED : 0, me, &surv));
    if (!fatal)
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    if (me == victim) {
        for (int r = 0; r < victim; r++) {
            int x;
            MPI_OK(MPI_Recv(&x, 1, MPI_INT, r, TAG_READY, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        /* Give the survivors time to block (the outcome must not depend on it). */
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
        raise(SIGKILL);
        return 1;
    }

    int how = fatal ? BLOCK_RECV : me % NBLOCK;
    int rc = block(how, victim, &me);
    aborted(rc, block_name[how]);
    after(victim, surv);

    MPI_OK(MPI_Barrier(surv));
    MPI_OK(MPI_Comm_free(&surv));
    printf("OK dead (%s)\n", block_name[how]);
    fflush(stdout);
    MPI_OK(MPI_Finalize());
    return 0;
}
