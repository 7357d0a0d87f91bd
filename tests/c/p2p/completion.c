/* completion.c - Waitany, Waitsome, Testany, Testsome, Testall, Waitall with
 * MPI_REQUEST_NULL entries, all-null arrays and zero counts; completed
 * requests become MPI_REQUEST_NULL.  2..4 ranks (ranks > 1 only join the
 * barriers). */
#include "common.h"

#define N 8

static void check_empty(const MPI_Status *st)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG);
    MPI_OK(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == 0);
}

/* Rank 1 sends N ints with tags N-1 .. 0 (reverse order), each one after
 * receiving a go-ahead, so that completions arrive one by one. */
static void sender(int paced)
{
    for (int t = N - 1; t >= 0; t--) {
        int v = 1000 + t;
        if (paced)
            MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Send(&v, 1, MPI_INT, 0, t, MPI_COMM_WORLD));
    }
}

static void post(MPI_Request *r, int *vals)
{
    for (int i = 0; i < N; i++) {
        vals[i] = -1;
        if (i % 3 == 2)
            r[i] = MPI_REQUEST_NULL; /* gaps */
        else
            MPI_OK(MPI_Irecv(&vals[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &r[i]));
    }
}

/* Tags that get a receive (i % 3 != 2) but are sent for every t: receive
 * the others afterwards so nothing is left over. */
static void drain_gaps(void)
{
    for (int i = 0; i < N; i++)
        if (i % 3 == 2) {
            int v;
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(v == 1000 + i);
        }
}

static int active(void) { return N - N / 3; }

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size >= 2);
    MPI_Request r[N];
    MPI_Status st, sts[N];
    int vals[N], idx, flag, outc, ind[N];

    /* Degenerate arrays. */
    {
        MPI_Request nul[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_OK(MPI_Waitany(3, nul, &idx, &st));
        CHECK(idx == MPI_UNDEFINED);
        check_empty(&st);
        flag = 0;
        MPI_OK(MPI_Testany(3, nul, &idx, &flag, &st));
        CHECK(flag == 1 && idx == MPI_UNDEFINED);
        MPI_OK(MPI_Waitsome(3, nul, &outc, ind, sts));
        CHECK(outc == MPI_UNDEFINED);
        MPI_OK(MPI_Testsome(3, nul, &outc, ind, sts));
        CHECK(outc == MPI_UNDEFINED);
        flag = 0;
        MPI_OK(MPI_Testall(3, nul, &flag, sts));
        CHECK(flag == 1);
        check_empty(&sts[1]);
        MPI_OK(MPI_Waitall(3, nul, sts));
        check_empty(&sts[2]);
        MPI_OK(MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE));
        MPI_OK(MPI_Waitany(0, NULL, &idx, MPI_STATUS_IGNORE));
        CHECK(idx == MPI_UNDEFINED);
        MPI_Request one = MPI_REQUEST_NULL;
        flag = 0;
        MPI_OK(MPI_Test(&one, &flag, &st));
        CHECK(flag == 1);
        check_empty(&st);
        MPI_OK(MPI_Wait(&one, &st));
        check_empty(&st);
    }

    /* Waitany, completions paced one by one. */
    if (t_rank == 0) {
        post(r, vals);
        for (int t = N - 1; t >= 0; t--) {
            MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 100, MPI_COMM_WORLD));
            if (t % 3 == 2)
                continue; /* no receive posted for this one */
            MPI_OK(MPI_Waitany(N, r, &idx, &st));
            CHECKF(idx == t, "waitany gave %d, expected %d", idx, t);
            CHECK(r[idx] == MPI_REQUEST_NULL);
            CHECK(vals[idx] == 1000 + idx && st.MPI_TAG == idx && st.MPI_SOURCE == 1);
        }
        MPI_OK(MPI_Waitany(N, r, &idx, &st));
        CHECK(idx == MPI_UNDEFINED);
        drain_gaps();
    } else if (t_rank == 1) {
        sender(1);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Testany polling. */
    if (t_rank == 0) {
        post(r, vals);
        int done = 0;
        while (done < active()) {
            MPI_OK(MPI_Testany(N, r, &idx, &flag, &st));
            if (flag) {
                CHECK(idx != MPI_UNDEFINED && r[idx] == MPI_REQUEST_NULL && vals[idx] == 1000 + idx);
                done++;
            } else {
                CHECK(idx == MPI_UNDEFINED);
            }
        }
        MPI_OK(MPI_Testany(N, r, &idx, &flag, &st));
        CHECK(flag == 1 && idx == MPI_UNDEFINED);
        drain_gaps();
    } else if (t_rank == 1) {
        sender(0);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Waitsome. */
    if (t_rank == 0) {
        post(r, vals);
        int done = 0, seen[N] = {0};
        while (done < active()) {
            MPI_OK(MPI_Waitsome(N, r, &outc, ind, sts));
            CHECK(outc >= 1);
            for (int j = 0; j < outc; j++) {
                int i = ind[j];
                CHECK(!seen[i] && r[i] == MPI_REQUEST_NULL && vals[i] == 1000 + i && sts[j].MPI_TAG == i);
                seen[i] = 1;
            }
            done += outc;
        }
        MPI_OK(MPI_Waitsome(N, r, &outc, ind, sts));
        CHECK(outc == MPI_UNDEFINED);
        drain_gaps();
    } else if (t_rank == 1) {
        sender(0);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Testsome. */
    if (t_rank == 0) {
        post(r, vals);
        int done = 0;
        while (done < active()) {
            MPI_OK(MPI_Testsome(N, r, &outc, ind, MPI_STATUSES_IGNORE));
            CHECK(outc >= 0 && outc != MPI_UNDEFINED);
            for (int j = 0; j < outc; j++)
                CHECK(r[ind[j]] == MPI_REQUEST_NULL && vals[ind[j]] == 1000 + ind[j]);
            done += outc;
        }
        drain_gaps();
    } else if (t_rank == 1) {
        sender(0);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Testall: false until everything completed, then every request null. */
    if (t_rank == 0) {
        post(r, vals);
        flag = 0;
        MPI_OK(MPI_Testall(N, r, &flag, sts));
        CHECK(flag == 0); /* nothing sent yet */
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 101, MPI_COMM_WORLD));
        while (!flag)
            MPI_OK(MPI_Testall(N, r, &flag, sts));
        for (int i = 0; i < N; i++) {
            CHECK(r[i] == MPI_REQUEST_NULL);
            if (i % 3 == 2)
                check_empty(&sts[i]);
            else
                CHECK(vals[i] == 1000 + i && sts[i].MPI_TAG == i);
        }
        drain_gaps();
    } else if (t_rank == 1) {
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        sender(0);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    /* Request_get_status_all: the requests stay valid. */
    if (t_rank == 0) {
        MPI_Request rq[3];
        int a = -1, b = -1;
        MPI_OK(MPI_Irecv(&a, 1, MPI_INT, 1, 200, MPI_COMM_WORLD, &rq[0]));
        rq[1] = MPI_REQUEST_NULL;
        MPI_OK(MPI_Irecv(&b, 1, MPI_INT, 1, 201, MPI_COMM_WORLD, &rq[2]));
        flag = 0;
        MPI_OK(MPI_Request_get_status_all(3, rq, &flag, sts));
        CHECK(flag == 0);
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 202, MPI_COMM_WORLD));
        while (!flag)
            MPI_OK(MPI_Request_get_status_all(3, rq, &flag, sts));
        CHECK(rq[0] != MPI_REQUEST_NULL && rq[2] != MPI_REQUEST_NULL);
        CHECK(sts[0].MPI_TAG == 200 && sts[2].MPI_TAG == 201 && a == 200 && b == 201);
        check_empty(&sts[1]);
        MPI_OK(MPI_Waitall(3, rq, sts));
        CHECK(rq[0] == MPI_REQUEST_NULL && rq[2] == MPI_REQUEST_NULL && sts[2].MPI_TAG == 201);
    } else if (t_rank == 1) {
        int a = 200, b = 201;
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 202, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Send(&a, 1, MPI_INT, 0, 200, MPI_COMM_WORLD));
        MPI_OK(MPI_Send(&b, 1, MPI_INT, 0, 201, MPI_COMM_WORLD));
    }
#endif

    /* Waitall with mixed sends and receives, with statuses. */
    if (t_rank <= 1) {
        int peer = 1 - t_rank;
        int out[N], in[N];
        MPI_Request rr[2 * N];
        for (int i = 0; i < N; i++) {
            out[i] = t_rank * 100 + i;
            MPI_OK(MPI_Irecv(&in[i], 1, MPI_INT, peer, i, MPI_COMM_WORLD, &rr[i]));
            MPI_OK(MPI_Isend(&out[i], 1, MPI_INT, peer, i, MPI_COMM_WORLD, &rr[N + i]));
        }
        MPI_Status all[2 * N];
        MPI_OK(MPI_Waitall(2 * N, rr, all));
        for (int i = 0; i < N; i++) {
            CHECK(in[i] == peer * 100 + i && all[i].MPI_SOURCE == peer && all[i].MPI_TAG == i);
            CHECK(rr[i] == MPI_REQUEST_NULL && rr[N + i] == MPI_REQUEST_NULL);
        }
    }

    /* Waitall whose first request stays pending while later ones are complete at once (a
     * send, and a receive of a message already there): all are taken, with their statuses,
     * whichever order they complete in. */
    if (t_rank <= 1) {
        int peer = 1 - t_rank;
        if (t_rank == 0) {
            int late = -1, go = 7, early = -1;
            MPI_Request rq[3];
            MPI_Status sts[3];
            MPI_OK(MPI_Probe(peer, 301, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Irecv(&late, 1, MPI_INT, peer, 300, MPI_COMM_WORLD, &rq[0]));
            MPI_OK(MPI_Isend(&go, 1, MPI_INT, peer, 302, MPI_COMM_WORLD, &rq[1]));
            MPI_OK(MPI_Irecv(&early, 1, MPI_INT, peer, 301, MPI_COMM_WORLD, &rq[2]));
            MPI_OK(MPI_Waitall(3, rq, sts));
            CHECK(late == 8 && early == 9);
            CHECK(sts[0].MPI_TAG == 300 && sts[0].MPI_SOURCE == peer);
            CHECK(sts[2].MPI_TAG == 301 && sts[2].MPI_SOURCE == peer);
            CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL &&
                  rq[2] == MPI_REQUEST_NULL);
        } else {
            int early = 9, late = 8, go = -1;
            MPI_OK(MPI_Send(&early, 1, MPI_INT, peer, 301, MPI_COMM_WORLD));
            MPI_OK(MPI_Recv(&go, 1, MPI_INT, peer, 302, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(go == 7);
            MPI_OK(MPI_Send(&late, 1, MPI_INT, peer, 300, MPI_COMM_WORLD));
        }
    }

    t_done("completion");
    return 0;
}
