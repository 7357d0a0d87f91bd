/* persistent.c - persistent requests restarted many times (all four send
 * modes, small and rendezvous sizes, Start and Startall), inactive requests
 * (Wait/Test/Request_get_status answer the empty status), Request_get_status
 * on active requests, Request_free on active and inactive requests.
 * Exactly 2 ranks. */
#include "common.h"

#define ROUNDS 300

static void check_empty(const MPI_Status *st)
{
    int cnt = -1, flag = -1;
    CHECKF(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG, "source %d tag %d", st->MPI_SOURCE,
           st->MPI_TAG);
    MPI_OK(MPI_Get_count(st, MPI_BYTE, &cnt));
    CHECK(cnt == 0);
    MPI_OK(MPI_Test_cancelled(st, &flag));
    CHECK(flag == 0);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    int peer = 1 - t_rank;
    static const int sizes[] = {4, 4096, 300000};
    unsigned char *sb = xmalloc(300000), *rb = xmalloc(300000);
    int bsize = 2 * (300000 + MPI_BSEND_OVERHEAD);
    void *bbuf = xmalloc((size_t)bsize);
    MPI_OK(MPI_Buffer_attach(bbuf, bsize));

    for (int k = 0; k < 3; k++) {
        int n = sizes[k];
        int rounds = n > 100000 ? 20 : ROUNDS;
        for (int mode = 0; mode < 4; mode++) {
            MPI_Request req[2];
            int tag = 10 + mode;
            if (t_rank == 0) {
                switch (mode) {
                case 0: MPI_OK(MPI_Send_init(sb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0])); break;
                case 1: MPI_OK(MPI_Ssend_init(sb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0])); break;
                case 2: MPI_OK(MPI_Rsend_init(sb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0])); break;
                default: MPI_OK(MPI_Bsend_init(sb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0])); break;
                }
                MPI_OK(MPI_Recv_init(rb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]));
            } else {
                MPI_OK(MPI_Recv_init(rb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]));
                MPI_OK(MPI_Send_init(sb, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]));
            }
            /* Inactive: Wait, Test and Request_get_status answer at once. */
            MPI_Status st;
            int flag = 0;
            MPI_OK(MPI_Wait(&req[0], &st));
            CHECK(req[0] != MPI_REQUEST_NULL);
            check_empty(&st);
            MPI_OK(MPI_Test(&req[1], &flag, &st));
            CHECK(flag == 1 && req[1] != MPI_REQUEST_NULL);
            check_empty(&st);
            MPI_OK(MPI_Request_get_status(req[0], &flag, &st));
            CHECK(flag == 1);
            check_empty(&st);

            for (int i = 0; i < rounds; i++) {
                if (t_rank == 0) {
                    /* ping (ready mode needs the peer's receive posted: the
                     * peer starts its receive before answering the previous
                     * round, and round 0 is preceded by a barrier) */
                    if (i == 0)
                        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                    fill(sb, (size_t)n, (unsigned)i, (unsigned)mode);
                    MPI_OK(MPI_Start(&req[1]));
                    MPI_OK(MPI_Start(&req[0]));
                    MPI_OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
                    MPI_OK(MPI_Wait(&req[1], &st));
                    CHECK(req[0] != MPI_REQUEST_NULL && req[1] != MPI_REQUEST_NULL);
                    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == tag);
                    CHECKF(verify(rb, (size_t)n, (unsigned)i + 1000, (unsigned)mode) < 0, "round %d", i);
                } else {
                    if (i == 0) {
                        MPI_OK(MPI_Start(&req[0]));
                        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                    }
                    /* Poll with Request_get_status, which does not free. */
                    flag = 0;
                    while (!flag)
                        MPI_OK(MPI_Request_get_status(req[0], &flag, &st));
                    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == tag);
                    MPI_OK(MPI_Wait(&req[0], &st));
                    CHECK(st.MPI_SOURCE == peer);
                    int cnt = 0;
                    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
                    CHECK(cnt == n);
                    CHECKF(verify(rb, (size_t)n, (unsigned)i, (unsigned)mode) < 0, "round %d", i);
                    fill(sb, (size_t)n, (unsigned)i + 1000, (unsigned)mode);
                    if (i + 1 < rounds)
                        MPI_OK(MPI_Start(&req[0]));
                    MPI_OK(MPI_Startall(1, &req[1]));
                    MPI_OK(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
                }
            }
            MPI_OK(MPI_Request_free(&req[0]));
            MPI_OK(MPI_Request_free(&req[1]));
            CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL);
        }
    }

    /* Startall / Waitall over many persistent requests to oneself. */
    {
        enum { N = 16 };
        MPI_Request rq[2 * N];
        int out[N], in[N];
        for (int i = 0; i < N; i++) {
            MPI_OK(MPI_Recv_init(&in[i], 1, MPI_INT, t_rank, i, MPI_COMM_WORLD, &rq[i]));
            MPI_OK(MPI_Send_init(&out[i], 1, MPI_INT, t_rank, i, MPI_COMM_WORLD, &rq[N + i]));
        }
        for (int round = 0; round < 50; round++) {
            for (int i = 0; i < N; i++) {
                out[i] = round * 100 + i;
                in[i] = -1;
            }
            MPI_OK(MPI_Startall(2 * N, rq));
            MPI_OK(MPI_Waitall(2 * N, rq, MPI_STATUSES_IGNORE));
            for (int i = 0; i < N; i++)
                CHECK(in[i] == round * 100 + i);
        }
        for (int i = 0; i < 2 * N; i++)
            MPI_OK(MPI_Request_free(&rq[i]));
    }

    /* Request_free on an active send: the message still arrives. */
    {
        int v = 4242 + t_rank;
        MPI_Request r;
        MPI_OK(MPI_Isend(&v, 1, MPI_INT, peer, 99, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL);
        int got = 0;
        MPI_OK(MPI_Recv(&got, 1, MPI_INT, peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == 4242 + peer);
        /* a large one too (rendezvous): the buffer must stay valid until
         * the peer confirms reception */
        fill(sb, 300000, 77, (unsigned)t_rank);
        MPI_OK(MPI_Isend(sb, 300000, MPI_BYTE, peer, 98, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Request_free(&r));
        MPI_OK(MPI_Recv(rb, 300000, MPI_BYTE, peer, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(verify(rb, 300000, 77, (unsigned)peer) < 0);
        MPI_OK(MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 97, NULL, 0, MPI_BYTE, peer, 97, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
    }

    /* A persistent receive started after its message arrived (unexpected), rendezvous-sized:
     * the receiver's request for the data must name the persistent request (over TCP the data
     * once came back for an unknown request and the receive never completed). Twice each, by
     * source and by MPI_ANY_SOURCE. */
    for (int round = 0; round < 4; round++) {
        MPI_Request r;
        int src = round % 2 ? MPI_ANY_SOURCE : peer;
        if (t_rank == 0) {
            memset(rb, 0, 300000);
            MPI_OK(MPI_Recv_init(rb, 300000, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            /* The message is in the unexpected queue before the start. */
            int flag = 0;
            while (!flag)
                MPI_OK(MPI_Iprobe(peer, 96, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Start(&r));
            MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECKF(verify(rb, 300000, 96, (unsigned)round) < 0, "round %d", round);
            MPI_OK(MPI_Request_free(&r));
        } else {
            fill(sb, 300000, 96, (unsigned)round);
            MPI_OK(MPI_Isend(sb, 300000, MPI_BYTE, peer, 96, MPI_COMM_WORLD, &r));
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
    }

    void *det;
    int dsz;
    MPI_OK(MPI_Buffer_detach(&det, &dsz));
    free(bbuf);
    free(sb);
    free(rb);
    t_done("persistent");
    return 0;
}
