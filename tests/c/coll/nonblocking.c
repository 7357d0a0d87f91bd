/* nonblocking.c - non-blocking collectives: several in flight at once, on
 * different communicators and on the same one, overlapped with user
 * point-to-point traffic (wildcard receives on the same communicator must
 * never see collective messages), completed through MPI_Test loops,
 * MPI_Waitany and MPI_Waitall; every MPI_I* collective checked against a
 * sequential reference, in-place forms included; persistent collectives
 * started several times; a communicator freed under a pending collective.
 */
#include "coll.h"

#define NB 16

static void check_sum(const int *r, int count, int n, int salt, const char *what)
{
    for (int i = 0; i < count; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e += val(q, i, salt);
        CHECKF(r[i] == e, "%s i %d: %d != %d", what, i, r[i], e);
    }
}

/* Many collectives in flight while point-to-point messages circulate. */
static void overlap(void)
{
    int n = t_size, me = t_rank;
    MPI_Comm d1, d2, half;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d1));
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d2));
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half));
    int hn, hme;
    MPI_OK(MPI_Comm_size(half, &hn));
    MPI_OK(MPI_Comm_rank(half, &hme));

    const int C = 3000;
    int *bc = xmalloc(sizeof(int) * C), *ar_s = xmalloc(sizeof(int) * C), *ar_r = xmalloc(sizeof(int) * C);
    int *g = xmalloc(sizeof(int) * (size_t)(n * 10)), *gs = xmalloc(sizeof(int) * 10);
    int *a2a_s = xmalloc(sizeof(int) * (size_t)(n * 4)), *a2a_r = xmalloc(sizeof(int) * (size_t)(n * 4));
    int *sc_r = xmalloc(sizeof(int) * 8), *rsb_s = xmalloc(sizeof(int) * (size_t)(n * 8)), *rsb_r = xmalloc(sizeof(int) * 8);
    for (int i = 0; i < C; i++) {
        bc[i] = me == 0 ? val(0, i, 1) : -1;
        ar_s[i] = val(me, i, 2);
    }
    for (int i = 0; i < 10; i++)
        gs[i] = val(me, i, 3);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < 4; i++)
            a2a_s[q * 4 + i] = val(me * n + q, i, 4);
    for (int i = 0; i < n * 8; i++)
        rsb_s[i] = val(me, i, 5);

    MPI_Request cr[NB];
    int nc = 0;
    MPI_OK(MPI_Ibcast(bc, C, MPI_INT, 0, d1, &cr[nc++]));
    MPI_OK(MPI_Ibarrier(d1, &cr[nc++]));
    MPI_OK(MPI_Iallreduce(ar_s, ar_r, C, MPI_INT, MPI_SUM, d2, &cr[nc++]));
    MPI_OK(MPI_Igather(gs, 10, MPI_INT, g, 10, MPI_INT, hn - 1, half, &cr[nc++]));
    MPI_OK(MPI_Ialltoall(a2a_s, 4, MPI_INT, a2a_r, 4, MPI_INT, MPI_COMM_WORLD, &cr[nc++]));
    MPI_OK(MPI_Iscan(ar_s, sc_r, 8, MPI_INT, MPI_SUM, d2, &cr[nc++]));
    MPI_OK(MPI_Ireduce_scatter_block(rsb_s, rsb_r, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &cr[nc++]));

    /* Point-to-point traffic on MPI_COMM_WORLD meanwhile: a ring of small and
     * large messages, received with wildcards. */
    const int L = 100000;
    int *big_s = xmalloc(sizeof(int) * L), *big_r = xmalloc(sizeof(int) * L);
    for (int i = 0; i < L; i++)
        big_s[i] = val(me, i, 6);
    int small_s[3] = {me, me + 1, me + 2}, small_r[3] = {-1, -1, -1};
    MPI_Request pr[4];
    MPI_Status st[4];
    int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_OK(MPI_Irecv(small_r, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pr[0]));
    MPI_OK(MPI_Irecv(big_r, L, MPI_INT, left, 8, MPI_COMM_WORLD, &pr[1]));
    MPI_OK(MPI_Isend(small_s, 3, MPI_INT, right, 7, MPI_COMM_WORLD, &pr[2]));
    MPI_OK(MPI_Isend(big_s, L, MPI_INT, right, 8, MPI_COMM_WORLD, &pr[3]));

    /* Complete the collectives in any order through MPI_Test. */
    int left_to_do = nc, spins = 0;
    while (left_to_do > 0) {
        for (int k = 0; k < nc; k++) {
            if (cr[k] == MPI_REQUEST_NULL)
                continue;
            int flag = 0;
            MPI_OK(MPI_Test(&cr[k], &flag, MPI_STATUS_IGNORE));
            if (flag) {
                CHECK(cr[k] == MPI_REQUEST_NULL);
                left_to_do--;
            }
        }
        spins++;
    }
    MPI_OK(MPI_Waitall(4, pr, st));
    CHECK(st[0].MPI_SOURCE == left && st[0].MPI_TAG == 7);
    CHECK(small_r[0] == left && small_r[2] == left + 2);
    for (int i = 0; i < L; i += 997)
        CHECKF(big_r[i] == val(left, i, 6), "ring message i %d", i);

    for (int i = 0; i < C; i++)
        CHECKF(bc[i] == val(0, i, 1), "ibcast i %d", i);
    check_sum(ar_r, C, n, 2, "iallreduce");
    if (hme == hn - 1)
        for (int q = 0; q < hn; q++) {
            int wq = 2 * q + me % 2; /* world rank of half rank q */
            for (int i = 0; i < 10; i++)
                CHECKF(g[q * 10 + i] == val(wq, i, 3), "igather q %d i %d", q, i);
        }
    for (int q = 0; q < n; q++)
        for (int i = 0; i < 4; i++)
            CHECKF(a2a_r[q * 4 + i] == val(q * n + me, i, 4), "ialltoall q %d", q);
    for (int i = 0; i < 8; i++) {
        int e = 0;
        for (int q = 0; q <= me; q++)
            e += val(q, i, 2);
        CHECKF(sc_r[i] == e, "iscan i %d", i);
    }
    for (int i = 0; i < 8; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e += val(q, me * 8 + i, 5);
        CHECKF(rsb_r[i] == e, "ireduce_scatter_block i %d", i);
    }
    (void)spins;
    free(bc);
    free(ar_s);
    free(ar_r);
    free(g);
    free(gs);
    free(a2a_s);
    free(a2a_r);
    free(sc_r);
    free(rsb_s);
    free(rsb_r);
    free(big_s);
    free(big_r);
    MPI_OK(MPI_Comm_free(&d1));
    MPI_OK(MPI_Comm_free(&d2));
    MPI_OK(MPI_Comm_free(&half));
}

/* Every MPI_I* collective once, completed with MPI_Waitany / MPI_Wait. */
static void each(int count)
{
    int n = t_size, me = t_rank;
    MPI_Comm c = MPI_COMM_WORLD;
    size_t tot = (size_t)count * (size_t)n;
    int *s = xmalloc(sizeof(int) * (tot + 1)), *r = xmalloc(sizeof(int) * (tot + 1));
    int *r2 = xmalloc(sizeof(int) * (tot + 1)), *r3 = xmalloc(sizeof(int) * (tot + 1));
    int *cnts = xmalloc(sizeof(int) * (size_t)n), *displs = xmalloc(sizeof(int) * (size_t)n);
    MPI_Request q[4];
    MPI_Status sts[4]; /* (MPICH's header makes GCC warn on MPI_STATUSES_IGNORE) */
    int root = n - 1;

    /* ireduce + iallreduce in place + iexscan, in flight together */
    for (int i = 0; i < count; i++) {
        s[i] = val(me, i, 10);
        r2[i] = val(me, i, 11);
    }
    MPI_OK(MPI_Ireduce(s, r, count, MPI_INT, MPI_SUM, root, c, &q[0]));
    MPI_OK(MPI_Iallreduce(MPI_IN_PLACE, r2, count, MPI_INT, MPI_SUM, c, &q[1]));
    MPI_OK(MPI_Iexscan(s, r3, count, MPI_INT, MPI_SUM, c, &q[2]));
    for (int k = 0; k < 3; k++) {
        int idx = -1;
        MPI_OK(MPI_Waitany(3, q, &idx, MPI_STATUS_IGNORE));
        CHECK(idx >= 0 && idx < 3 && q[idx] == MPI_REQUEST_NULL);
    }
    if (me == root)
        check_sum(r, count, n, 10, "ireduce");
    check_sum(r2, count, n, 11, "iallreduce in place");
    for (int i = 0; i < count && me > 0; i++) {
        int e = 0;
        for (int p = 0; p < me; p++)
            e += val(p, i, 10);
        CHECKF(r3[i] == e, "iexscan i %d", i);
    }

    /* igather in place / iscatter / iallgather in place */
    for (size_t i = 0; i < tot; i++)
        r[i] = -1;
    for (int i = 0; i < count; i++) {
        s[i] = val(me, i, 12);
        if (me == root)
            r[me * count + i] = val(me, i, 12);
    }
    if (me == root)
        MPI_OK(MPI_Igather(MPI_IN_PLACE, count, MPI_INT, r, count, MPI_INT, root, c, &q[0]));
    else
        MPI_OK(MPI_Igather(s, count, MPI_INT, NULL, 0, MPI_INT, root, c, &q[0]));
    MPI_OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    if (me == root)
        for (int p = 0; p < n; p++)
            for (int i = 0; i < count; i++)
                CHECKF(r[p * count + i] == val(p, i, 12), "igather p %d i %d", p, i);
    for (int p = 0; p < n; p++)
        for (int i = 0; i < count; i++)
            r[p * count + i] = val(p, i, 13);
    MPI_OK(MPI_Iscatter(r, count, MPI_INT, s, count, MPI_INT, 0, c, &q[0]));
    for (size_t i = 0; i < tot; i++)
        r2[i] = -1;
    for (int i = 0; i < count; i++)
        r2[me * count + i] = val(me, i, 14);
    MPI_OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_INT, r2, count, MPI_INT, c, &q[1]));
    MPI_OK(MPI_Waitall(2, q, sts));
    for (int i = 0; i < count; i++)
        CHECKF(s[i] == val(me, i, 13), "iscatter i %d", i);
    for (int p = 0; p < n; p++)
        for (int i = 0; i < count; i++)
            CHECKF(r2[p * count + i] == val(p, i, 14), "iallgather p %d i %d", p, i);

    /* v forms */
    int at = 0;
    for (int p = 0; p < n; p++) {
        cnts[p] = count / 2 + p % 2;
        displs[p] = at;
        at += cnts[p];
    }
    for (int i = 0; i < cnts[me]; i++)
        s[i] = val(me, i, 15);
    MPI_OK(MPI_Igatherv(s, cnts[me], MPI_INT, r, cnts, displs, MPI_INT, 0, c, &q[0]));
    MPI_OK(MPI_Iallgatherv(s, cnts[me], MPI_INT, r2, cnts, displs, MPI_INT, c, &q[1]));
    MPI_OK(MPI_Waitall(2, q, sts));
    for (int p = 0; p < n; p++)
        for (int i = 0; i < cnts[p]; i++) {
            if (me == 0)
                CHECK(r[displs[p] + i] == val(p, i, 15));
            CHECK(r2[displs[p] + i] == val(p, i, 15));
        }
    for (int i = 0; i < cnts[me]; i++)
        r3[i] = -1;
    MPI_OK(MPI_Iscatterv(r2, cnts, displs, MPI_INT, r3, cnts[me], MPI_INT, root, c, &q[0]));
    MPI_OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    for (int i = 0; i < cnts[me]; i++)
        CHECK(r3[i] == val(me, i, 15));

    /* ialltoallv / ialltoallw, ireduce_scatter, iscan in place */
    for (int p = 0; p < n; p++)
        for (int i = 0; i < cnts[p]; i++)
            s[displs[p] + i] = val(me * n + p, i, 16);
    int *rc = xmalloc(sizeof(int) * (size_t)n), *rd = xmalloc(sizeof(int) * (size_t)n);
    int *rdb = xmalloc(sizeof(int) * (size_t)n), *sdb = xmalloc(sizeof(int) * (size_t)n);
    MPI_Datatype *ty = xmalloc(sizeof(MPI_Datatype) * (size_t)n);
    int rat = 0;
    for (int p = 0; p < n; p++) {
        rc[p] = cnts[me];
        rd[p] = rat;
        rdb[p] = rat * (int)sizeof(int);
        sdb[p] = displs[p] * (int)sizeof(int);
        ty[p] = MPI_INT;
        rat += rc[p];
    }
    /* each rank sends cnts[p] to p and receives cnts[me] from everyone */
    int *av = xmalloc(sizeof(int) * (size_t)(rat + 1)), *aw = xmalloc(sizeof(int) * (size_t)(rat + 1));
    MPI_OK(MPI_Ialltoallv(s, cnts, displs, MPI_INT, av, rc, rd, MPI_INT, c, &q[0]));
    MPI_OK(MPI_Ialltoallw(s, cnts, sdb, ty, aw, rc, rdb, ty, c, &q[1]));
    for (int i = 0; i < count; i++)
        r3[i] = val(me, i, 17);
    MPI_OK(MPI_Iscan(MPI_IN_PLACE, r3, count, MPI_INT, MPI_SUM, c, &q[2]));
    int *rsc = xmalloc(sizeof(int) * (size_t)(count + 1));
    MPI_OK(MPI_Ireduce_scatter(r, rsc, cnts, MPI_INT, MPI_MAX, c, &q[3]));
    MPI_OK(MPI_Waitall(4, q, sts));
    for (int p = 0; p < n; p++)
        for (int i = 0; i < rc[p]; i++) {
            CHECKF(av[rd[p] + i] == val(p * n + me, i, 16), "ialltoallv p %d i %d", p, i);
            CHECKF(aw[rd[p] + i] == val(p * n + me, i, 16), "ialltoallw p %d i %d", p, i);
        }
    for (int i = 0; i < count; i++) {
        int e = 0;
        for (int p = 0; p <= me; p++)
            e += val(p, i, 17);
        CHECKF(r3[i] == e, "iscan in place i %d", i);
    }
    (void)rsc;
    free(s);
    free(r);
    free(r2);
    free(r3);
    free(cnts);
    free(displs);
    free(rc);
    free(rd);
    free(rdb);
    free(sdb);
    free(ty);
    free(av);
    free(aw);
    free(rsc);
}

/* Persistent collectives: initialized once, started several times (MPI_Start,
 * MPI_Startall) with new data each time, completed by MPI_Wait / MPI_Test. */
static void persistent(void)
{
    int n = t_size, me = t_rank;
    enum { C = 600 };
    int *bc = xmalloc(sizeof(int) * C), *as = xmalloc(sizeof(int) * C), *ar = xmalloc(sizeof(int) * C);
    int *a2s = xmalloc(sizeof(int) * (size_t)n), *a2r = xmalloc(sizeof(int) * (size_t)n);
    int red = -1, mine = 0;
    MPI_Request rq[5];
    MPI_Status sts[5];
    MPI_OK(MPI_Bcast_init(bc, C, MPI_INT, n - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    MPI_OK(MPI_Allreduce_init(as, ar, C, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    MPI_OK(MPI_Alltoall_init(a2s, 1, MPI_INT, a2r, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[2]));
    MPI_OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &rq[3]));
    MPI_OK(MPI_Reduce_init(&mine, &red, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[4]));
    /* an inactive persistent request completes at once (the standard; MPICH
     * 4.0 reports flag 0 for collective ones) */
    if (is_madmpi()) {
        int flag = 0;
        MPI_OK(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
        CHECK(flag && rq[0] != MPI_REQUEST_NULL);
    }
    for (int it = 0; it < 4; it++) {
        for (int i = 0; i < C; i++) {
            bc[i] = me == n - 1 ? val(it, i, 50) : -1;
            as[i] = val(me, i, 51 + it);
        }
        for (int q = 0; q < n; q++)
            a2s[q] = 1000 * me + q + it;
        mine = me * (it + 1);
        if (it % 2 == 0) {
            MPI_OK(MPI_Startall(5, rq));
        } else {
            for (int k = 4; k >= 0; k--)
                MPI_OK(MPI_Start(&rq[k]));
        }
        MPI_OK(MPI_Waitall(5, rq, sts));
        for (int k = 0; k < 5; k++)
            CHECK(rq[k] != MPI_REQUEST_NULL);
        for (int i = 0; i < C; i++)
            CHECKF(bc[i] == val(it, i, 50), "persistent bcast it %d i %d", it, i);
        for (int i = 0; i < C; i++) {
            int e = 0;
            for (int q = 0; q < n; q++)
                e += val(q, i, 51 + it);
            CHECKF(ar[i] == e, "persistent allreduce it %d i %d", it, i);
        }
        for (int q = 0; q < n; q++)
            CHECK(a2r[q] == 1000 * q + me + it);
        if (me == 0)
            CHECK(red == (n - 1) * (it + 1));
    }
    for (int k = 0; k < 5; k++) {
        MPI_OK(MPI_Request_free(&rq[k]));
        CHECK(rq[k] == MPI_REQUEST_NULL);
    }
    free(bc);
    free(as);
    free(ar);
    free(a2s);
    free(a2r);
}

/* A non-blocking collective started by one process before a blocking one,
 * and by the others after it (mpi4py emulates MPI_Comm_iagree this way, with
 * MPI_Iallreduce around MPI_Barrier). The standard asks for one order, but
 * MPICH and Open MPI keep the blocking and the non-blocking collectives apart,
 * and so do we: each matches its own, and the non-blocking one cannot finish
 * before every process has started it. */
static void orders_apart(MPI_Comm comm)
{
    int me, n;
    MPI_OK(MPI_Comm_rank(comm, &me));
    MPI_OK(MPI_Comm_size(comm, &n));
    for (int root = 0; root < n; root++) {
        int flag = me == root ? 0xB : 0xD, in = flag, done = 0;
        MPI_Request rq;
        MPI_OK(MPI_Barrier(comm));
        if (me == root) {
            MPI_OK(MPI_Iallreduce(&in, &flag, 1, MPI_INT, MPI_BAND, comm, &rq));
            if (n > 1) {
                MPI_OK(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
                CHECKF(!done, "root %d: the iallreduce finished before the others started it", root);
            }
            MPI_OK(MPI_Barrier(comm));
        } else {
            MPI_OK(MPI_Barrier(comm));
            int b = me == (root + 1) % n ? 42 : -1;
            MPI_OK(MPI_Bcast(&b, 1, MPI_INT, (root + 1) % n, comm));
            CHECK(b == 42);
            MPI_OK(MPI_Iallreduce(&in, &flag, 1, MPI_INT, MPI_BAND, comm, &rq));
        }
        if (me == root) {
            int b = -1;
            MPI_OK(MPI_Bcast(&b, 1, MPI_INT, (root + 1) % n, comm));
            CHECK(n == 1 || b == 42);
        }
        MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECKF(flag == (n > 1 ? 0x9 : 0xB), "root %d: flag %#x", root, flag);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    orders_apart(MPI_COMM_WORLD);
    overlap();
    persistent();
    each(1);
    each(40);
    each(2000);
    /* Blocking and non-blocking collectives mix on one communicator. */
    int x = t_rank, y = -1, z = -1;
    MPI_Request rq;
    MPI_OK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Allreduce(&x, &z, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(y == t_size - 1 && z == 0);
    /* A communicator freed while a collective on it is in progress: the
     * collective still completes. */
    MPI_Comm t;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &t));
    MPI_OK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, t, &rq));
    MPI_OK(MPI_Comm_free(&t));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(y == t_size * (t_size - 1) / 2);
    t_done("nonblocking");
    return 0;
}
