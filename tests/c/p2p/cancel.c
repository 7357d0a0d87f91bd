/* cancel.c - MPI_Cancel of a posted receive, of unmatched sends (small and
 * rendezvous-sized: Test_cancelled is true and the receiver never gets
 * them), of a completed request (not cancelled), and Test_cancelled on
 * ordinary statuses; a cancelled send to self is complete and cancelled at
 * the next MPI_Request_get_status.  Under MADMPI_STRATEGY=aggreg a small
 * standard send is copied into the packet being built and complete when
 * posted: its cancel fails (MPI-4.1 3.8.4), and the message arrives.  Exactly
 * 2 ranks. */
#include "common.h"

/* Whether small standard sends are complete when posted (madmpi's `aggreg`:
 * every one is packed; under the default `adaptive` the first one after a
 * polling call leaves alone and stays cancellable). */
static int packs_all(void)
{
    const char *s = getenv("MADMPI_STRATEGY");
    return s && strcmp(s, "aggreg") == 0;
}

#define BIG (512 * 1024)

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    int madmpi = is_madmpi();
    int peer = 1 - t_rank;
    MPI_Request r;
    MPI_Status st;
    int flag;

    /* 1. A posted receive that nothing matches. */
    {
        int v = 5;
        MPI_OK(MPI_Irecv(&v, 1, MPI_INT, peer, 55, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Cancel(&r));
        MPI_OK(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL);
        flag = 0;
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 1);
        CHECK(v == 5);
        /* ANY_SOURCE too */
        MPI_OK(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Cancel(&r));
        flag = 0;
        while (!flag)
            MPI_OK(MPI_Test(&r, &flag, &st));
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 1);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 2. Unmatched sends from rank 1 (small, then rendezvous-sized); rank 0
     * posts no receive for tag 77/78 until rank 1 has cancelled. */
    unsigned char *big = xmalloc(BIG);
    int cancelled[2] = {0, 0};
    if (t_rank == 1) {
        int v = 77;
        MPI_OK(MPI_Isend(&v, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Cancel(&r));
        MPI_OK(MPI_Wait(&r, &st));
        MPI_OK(MPI_Test_cancelled(&st, &cancelled[0]));
        /* (MPICH cannot cancel a rendezvous send: its Wait would wait for a
         * receive that comes only later, so this part is madmpi's.) */
        if (madmpi) {
            fill(big, BIG, 78, 0);
            MPI_OK(MPI_Isend(big, BIG, MPI_BYTE, 0, 78, MPI_COMM_WORLD, &r));
            MPI_OK(MPI_Cancel(&r));
            MPI_OK(MPI_Wait(&r, &st));
            MPI_OK(MPI_Test_cancelled(&st, &cancelled[1]));
        } else {
            cancelled[1] = 1; /* nothing sent */
        }
        if (madmpi)
            CHECKF((cancelled[0] || packs_all()) && cancelled[1],
                   "unmatched sends not cancelled: %d %d", cancelled[0], cancelled[1]);
        MPI_OK(MPI_Send(cancelled, 2, MPI_INT, 0, 79, MPI_COMM_WORLD));
    } else {
        MPI_OK(MPI_Recv(cancelled, 2, MPI_INT, 1, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        /* Whatever was cancelled must not arrive; what was not must. */
        for (int k = 0; k < 2; k++) {
            int tag = 77 + k;
            MPI_OK(MPI_Iprobe(1, tag, MPI_COMM_WORLD, &flag, &st));
            if (cancelled[k]) {
                CHECKF(flag == 0, "cancelled message with tag %d arrived", tag);
            } else {
                MPI_OK(MPI_Recv(big, BIG, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &st));
            }
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        /* Still nothing later on. */
        MPI_OK(MPI_Iprobe(1, 77, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 0 || !cancelled[0]);
        MPI_OK(MPI_Iprobe(1, 78, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 0 || !cancelled[1]);
    }

    /* 3. A send that was received: cancelling it after completion does
     * nothing (Test_cancelled false). */
    if (t_rank == 0) {
        int v = 1;
        MPI_OK(MPI_Issend(&v, 1, MPI_INT, 1, 80, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 1, 81, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        /* rank 1 has received it: the synchronous send is complete or about to be */
        MPI_OK(MPI_Cancel(&r));
        MPI_OK(MPI_Wait(&r, &st));
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 0);
    } else {
        int v = 0;
        MPI_OK(MPI_Recv(&v, 1, MPI_INT, 0, 80, MPI_COMM_WORLD, &st));
        CHECK(v == 1);
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 0);
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 0, 81, MPI_COMM_WORLD));
    }

    /* 4. A receive matched before the cancel is not cancelled. */
    if (t_rank == 0) {
        int v = 0;
        MPI_OK(MPI_Irecv(&v, 1, MPI_INT, 1, 82, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 83, MPI_COMM_WORLD));
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 1, 84, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        /* Rank 1's message was sent before its tag-84 one: it is here. */
        flag = 0;
        while (!flag)
            MPI_OK(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Cancel(&r));
        MPI_OK(MPI_Wait(&r, &st));
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 0 && v == 82);
    } else {
        int v = 82;
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 83, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Send(&v, 1, MPI_INT, 0, 82, MPI_COMM_WORLD));
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 0, 84, MPI_COMM_WORLD));
    }

    /* 5. Status_set_cancelled / Test_cancelled round trip. */
    MPI_OK(MPI_Status_set_cancelled(&st, 1));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1);
    MPI_OK(MPI_Status_set_cancelled(&st, 0));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 0);

    /* 6. Sends to self that nothing receives (synchronous, standard small,
     * standard rendezvous-sized): the cancel withdraws the message at once,
     * so the next Request_get_status (then Test) finds the request complete
     * and cancelled, as in MPICH.  Then the same to the other rank, which
     * posts no receive: complete and cancelled after some Tests. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    {
        int v = 90;
        for (int k = 0; k < 3; k++) {
            int tag = 90 + k;
            if (k == 0)
                MPI_OK(MPI_Issend(&v, 1, MPI_INT, t_rank, tag, MPI_COMM_WORLD, &r));
            else if (k == 1)
                MPI_OK(MPI_Isend(&v, 1, MPI_INT, t_rank, tag, MPI_COMM_WORLD, &r));
            else
                MPI_OK(MPI_Isend(big, BIG, MPI_BYTE, t_rank, tag, MPI_COMM_WORLD, &r));
            MPI_OK(MPI_Cancel(&r));
            flag = 0;
            MPI_OK(MPI_Request_get_status(r, &flag, &st));
            CHECKF(flag == 1, "send %d to self: not complete after MPI_Cancel", k);
            flag = 0;
            MPI_OK(MPI_Test_cancelled(&st, &flag));
            int done_at_post = k == 1 && packs_all() && !flag;
            CHECKF(flag == 1 || done_at_post, "send %d to self: not cancelled", k);
            flag = 0;
            MPI_OK(MPI_Test(&r, &flag, &st));
            CHECK(flag == 1 && r == MPI_REQUEST_NULL);
            MPI_OK(MPI_Test_cancelled(&st, &flag));
            CHECK(flag == !done_at_post);
            if (done_at_post) {
                /* Complete at posting, not cancelled: the message arrives. */
                int x = 0;
                MPI_OK(MPI_Recv(&x, 1, MPI_INT, t_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK(x == v);
            }
            MPI_OK(MPI_Iprobe(t_rank, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECKF(flag == 0, "cancelled send %d to self still arrives", k);
        }
        /* (MPICH may not cancel a send already on its way: madmpi's.) */
        if (t_rank == 1 && madmpi) {
            for (int k = 0; k < 2; k++) {
                if (k == 0)
                    MPI_OK(MPI_Issend(&v, 1, MPI_INT, 0, 95, MPI_COMM_WORLD, &r));
                else
                    MPI_OK(MPI_Isend(big, BIG, MPI_BYTE, 0, 96, MPI_COMM_WORLD, &r));
                MPI_OK(MPI_Cancel(&r));
                flag = 0;
                while (!flag)
                    MPI_OK(MPI_Test(&r, &flag, &st));
                MPI_OK(MPI_Test_cancelled(&st, &flag));
                CHECKF(flag == 1, "send %d to rank 0 not cancelled", k);
            }
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0) {
            MPI_OK(MPI_Iprobe(1, 95, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECK(flag == 0);
        }
    }

    free(big);
    t_done("cancel");
    return 0;
}
