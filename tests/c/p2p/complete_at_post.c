/* complete_at_post.c - sends complete when posted.  A small standard-mode
 * MPI_Isend that follows another one to the same peer (no MPI call that
 * polls between them) is copied into the packet being built and is complete
 * at once; madmpi gives all of them one shared handle, which is not
 * MPI_REQUEST_NULL and which every completion call takes: MPI_Wait, MPI_Test,
 * MPI_Waitall/Testall/Waitany/Testany/Waitsome/Testsome mixed with real
 * requests (pending receives, a persistent request), MPI_Request_free,
 * MPI_Request_get_status (the handle stays), MPI_Request_get_status_all;
 * MPI_Cancel on it succeeds and the send is not cancelled (the message
 * arrives); MPI_Start on it is MPI_ERR_REQUEST.  Every message arrives, in
 * order, intact.  Exactly 2 ranks: rank 0 sends, rank 1 receives and
 * answers. */
#include "common.h"

#define NS 6

/* Post round n's NS small sends to rank 1 (tag 100 n + k, value 1000 n + k),
 * back to back: all but the first are packed (madmpi). */
static void post_sends(int *v, int n, MPI_Request *r)
{
    for (int k = 0; k < NS; k++) {
        v[k] = 1000 * n + k;
        MPI_OK(MPI_Isend(&v[k], 1, MPI_INT, 1, 100 * n + k, MPI_COMM_WORLD, &r[k]));
    }
}

/* On madmpi, the packed sends share one handle (two live requests with the
 * same handle value can only be that one). */
static void check_shared(int madmpi, const MPI_Request *r)
{
    CHECK(r[1] != MPI_REQUEST_NULL);
    if (madmpi)
        for (int k = 2; k < NS; k++)
            CHECKF(r[k] == r[1], "send %d: handle %#lx, send 1: %#lx", k,
                   (unsigned long)r[k], (unsigned long)r[1]);
}

/* Rank 1: receive the NS messages of round `round` and check them. */
static void recv_round(int round)
{
    for (int k = 0; k < NS; k++) {
        int v = -1;
        MPI_Status st;
        MPI_OK(MPI_Recv(&v, 1, MPI_INT, 0, 100 * round + k, MPI_COMM_WORLD, &st));
        CHECKF(v == 1000 * round + k, "round %d message %d: %d", round, k, v);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 100 * round + k);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    int madmpi = is_madmpi();
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int v[NS], flag, idx, outcount, indices[NS + 2];
    MPI_Request r[NS + 2];
    MPI_Status st, sts[NS + 2];

    if (t_rank == 0) {
        /* 1. MPI_Waitall: a pending receive (rank 1 answers only once it has
         * the sends), the sends, a null handle. */
        int ans = -1;
        MPI_OK(MPI_Irecv(&ans, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, &r[0]));
        post_sends(v, 1, &r[1]);
        check_shared(madmpi, &r[1]);
        r[NS + 1] = MPI_REQUEST_NULL;
        MPI_OK(MPI_Waitall(NS + 2, r, sts));
        for (int k = 0; k < NS + 2; k++)
            CHECK(r[k] == MPI_REQUEST_NULL);
        CHECK(ans == 99 && sts[0].MPI_SOURCE == 1 && sts[0].MPI_TAG == 99);
        for (int k = 1; k <= NS; k++) {
            MPI_OK(MPI_Test_cancelled(&sts[k], &flag));
            CHECK(flag == 0);
        }

        /* 2. MPI_Test and MPI_Wait on each; MPI_Request_get_status first
         * (complete, the handle stays). */
        post_sends(v, 2, r);
        check_shared(madmpi, r);
        for (int k = NS - 1; k >= 0; k--) {
            MPI_Request h = r[k];
            flag = 0;
            MPI_OK(MPI_Request_get_status(r[k], &flag, &st));
            CHECK(r[k] == h);
            if (k == 0)
                MPI_OK(MPI_Wait(&r[k], &st));
            else if (flag) {
                MPI_OK(MPI_Test_cancelled(&st, &flag));
                CHECK(flag == 0);
                flag = 0;
                MPI_OK(MPI_Test(&r[k], &flag, &st));
                CHECK(flag == 1);
            } else
                MPI_OK(MPI_Wait(&r[k], &st));
            CHECK(r[k] == MPI_REQUEST_NULL);
            MPI_OK(MPI_Test_cancelled(&st, &flag));
            CHECK(flag == 0);
        }

        /* 3. MPI_Cancel: allowed to fail; a send that completes is not
         * cancelled and its message arrives (rank 1 checks). MPI_Start on
         * a complete send is an invalid request. */
        post_sends(v, 3, r);
        check_shared(madmpi, r);
        if (madmpi)
            EXPECT_CLASS(MPI_Start(&r[1]), MPI_ERR_REQUEST);
        int was_cancelled[NS];
        for (int k = 0; k < NS; k++) {
            MPI_OK(MPI_Cancel(&r[k]));
            MPI_OK(MPI_Wait(&r[k], &st));
            CHECK(r[k] == MPI_REQUEST_NULL);
            MPI_OK(MPI_Test_cancelled(&st, &was_cancelled[k]));
            if (madmpi && k > 0)
                CHECKF(!was_cancelled[k], "send %d complete at posting was cancelled", k);
        }
        MPI_OK(MPI_Send(was_cancelled, NS, MPI_INT, 1, 98, MPI_COMM_WORLD));

        /* 4. MPI_Request_free: the messages still arrive (their buffer is
         * left alone: a freed request gives no sign of completion). */
        static int v4[NS];
        post_sends(v4, 4, r);
        check_shared(madmpi, r);
        for (int k = 0; k < NS; k++) {
            MPI_OK(MPI_Request_free(&r[k]));
            CHECK(r[k] == MPI_REQUEST_NULL);
        }

        /* 5. Testall, Testany, Waitany, Testsome, Waitsome and
         * Request_get_status_all, with a persistent receive (inactive, then
         * started and pending until rank 1 answers) among the sends. */
        int pv = -1;
        MPI_Request pers;
        MPI_OK(MPI_Recv_init(&pv, 1, MPI_INT, 1, 97, MPI_COMM_WORLD, &pers));
        post_sends(v, 5, r);
        check_shared(madmpi, r);
        r[NS] = pers; /* inactive: complete with the empty status */
        MPI_OK(MPI_Request_get_status_all(NS + 1, r, &flag, MPI_STATUSES_IGNORE));
        CHECK(flag == 1);
        flag = 0;
        while (!flag)
            MPI_OK(MPI_Testall(NS + 1, r, &flag, sts));
        for (int k = 0; k < NS; k++)
            CHECK(r[k] == MPI_REQUEST_NULL);
        CHECK(r[NS] == pers);

        post_sends(v, 6, r);
        check_shared(madmpi, r);
        MPI_OK(MPI_Start(&pers));
        r[NS] = pers;
        /* Every send completes before the receive, which waits for rank
         * 1's answer (sent once it has all of round 6). */
        int left = NS;
        while (left > 0) {
            flag = 0;
            MPI_OK(MPI_Testany(NS, r, &idx, &flag, &st));
            CHECK(flag == 1);
            if (idx == MPI_UNDEFINED)
                break;
            CHECK(idx >= 0 && idx < NS && r[idx] == MPI_REQUEST_NULL);
            left--;
        }
        CHECK(left == 0);
        MPI_OK(MPI_Waitany(NS + 1, r, &idx, &st));
        CHECK(idx == NS && pv == 6099 && r[NS] == pers);

        post_sends(v, 7, r);
        check_shared(madmpi, r);
        MPI_OK(MPI_Start(&pers));
        r[NS] = pers;
        int got = 0;
        while (got < NS + 1) {
            MPI_OK(MPI_Testsome(NS + 1, r, &outcount, indices, sts));
            CHECK(outcount != MPI_UNDEFINED);
            for (int i = 0; i < outcount; i++) {
                CHECK(indices[i] == NS || r[indices[i]] == MPI_REQUEST_NULL);
                if (indices[i] == NS)
                    CHECK(pv == 7099 && sts[i].MPI_TAG == 97);
            }
            got += outcount;
        }
        MPI_OK(MPI_Waitsome(NS + 1, r, &outcount, indices, sts));
        CHECK(outcount == MPI_UNDEFINED);
        MPI_OK(MPI_Request_free(&pers));

        /* 6. Waitsome over sends only. */
        post_sends(v, 8, r);
        check_shared(madmpi, r);
        got = 0;
        while (got < NS) {
            MPI_OK(MPI_Waitsome(NS, r, &outcount, indices, sts));
            CHECK(outcount >= 1 && outcount != MPI_UNDEFINED);
            got += outcount;
        }
        for (int k = 0; k < NS; k++)
            CHECK(r[k] == MPI_REQUEST_NULL);
    } else {
        recv_round(1);
        int ans = 99;
        MPI_OK(MPI_Send(&ans, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
        recv_round(2);
        /* Round 3: the messages whose send was cancelled must not arrive,
         * the others must. */
        int was_cancelled[NS];
        MPI_OK(MPI_Recv(was_cancelled, NS, MPI_INT, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int k = 0; k < NS; k++) {
            if (was_cancelled[k]) {
                MPI_OK(MPI_Iprobe(0, 300 + k, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
                CHECKF(flag == 0, "cancelled message %d arrived", k);
                continue;
            }
            int x = -1;
            MPI_OK(MPI_Recv(&x, 1, MPI_INT, 0, 300 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(x == 3000 + k);
        }
        recv_round(4);
        recv_round(5);
        recv_round(6);
        ans = 6099;
        MPI_OK(MPI_Send(&ans, 1, MPI_INT, 0, 97, MPI_COMM_WORLD));
        recv_round(7);
        ans = 7099;
        MPI_OK(MPI_Send(&ans, 1, MPI_INT, 0, 97, MPI_COMM_WORLD));
        recv_round(8);
    }
    t_done("complete_at_post");
    return 0;
}
