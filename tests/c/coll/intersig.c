/* intersig.c - intercommunicator collectives with what the standard lets
 * differ between the two groups, or leaves insignificant: MPI_Alltoall,
 * MPI_Allgather and MPI_Alltoallv where group A sends a elements and
 * receives b while group B does the reverse (a != b), and rooted operations
 * whose MPI_PROC_NULL processes pass NULL buffers, garbage counts and an
 * operation their datatype does not have (MPI_MAX on MPI_BYTE), and whose
 * root passes no send (gather, reduce) or receive (scatter) buffer.
 * Blocking and non-blocking forms.  At least 2 ranks: even world ranks form
 * group A, odd ones group B. */
#include "coll.h"

static MPI_Comm ic;
static int g, lme, ln, rn;

static void wait_or_not(int nb, MPI_Request *r)
{
    if (nb)
        MPI_OK(MPI_Wait(r, MPI_STATUS_IGNORE));
}

/* The world rank of process i of group `grp`. */
static int world(int grp, int i)
{
    return 2 * i + grp;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size >= 2);
    g = t_rank % 2;
    MPI_Comm half;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g, t_rank, &half));
    MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - g, 11, &ic));
    MPI_OK(MPI_Comm_rank(ic, &lme));
    MPI_OK(MPI_Comm_size(ic, &ln));
    MPI_OK(MPI_Comm_remote_size(ic, &rn));
    int *sb = xmalloc(sizeof(int) * 64 * 8);
    int *rb = xmalloc(sizeof(int) * 64 * 8);
    MPI_Request r;

    /* 1. Alltoall and Allgather with different counts per group. */
    for (int nb = 0; nb < 2; nb++) {
        for (int a = 0; a <= 3; a++) {
            for (int b = 0; b <= 3; b++) {
                int sc = g == 0 ? a : b, rc = g == 0 ? b : a;
                for (int j = 0; j < rn; j++)
                    for (int k = 0; k < sc; k++)
                        sb[j * sc + k] = t_rank * 1000 + j * 10 + k;
                for (int i = 0; i < rn * rc; i++)
                    rb[i] = -1;
                if (nb) {
                    MPI_OK(MPI_Ialltoall(sb, sc, MPI_INT, rb, rc, MPI_INT, ic, &r));
                    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
                } else {
                    MPI_OK(MPI_Alltoall(sb, sc, MPI_INT, rb, rc, MPI_INT, ic));
                }
                for (int j = 0; j < rn; j++)
                    for (int k = 0; k < rc; k++)
                        CHECKF(rb[j * rc + k] == world(1 - g, j) * 1000 + lme * 10 + k,
                               "alltoall a=%d b=%d: from %d [%d] = %d", a, b, j, k, rb[j * rc + k]);
                /* allgather: every process of A sends a, receives b from each of B */
                for (int k = 0; k < sc; k++)
                    sb[k] = t_rank * 100 + k;
                if (nb) {
                    MPI_OK(MPI_Iallgather(sb, sc, MPI_INT, rb, rc, MPI_INT, ic, &r));
                    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
                } else {
                    MPI_OK(MPI_Allgather(sb, sc, MPI_INT, rb, rc, MPI_INT, ic));
                }
                for (int j = 0; j < rn; j++)
                    for (int k = 0; k < rc; k++)
                        CHECKF(rb[j * rc + k] == world(1 - g, j) * 100 + k, "allgather a=%d b=%d", a,
                               b);
            }
        }
    }
    /* Alltoallv: to process j of the other group, j + 1 + g elements. */
    {
        int scs[8], sds[8], rcs[8], rds[8], at = 0;
        CHECK(rn <= 8 && ln <= 8);
        for (int j = 0; j < rn; j++) {
            scs[j] = j + 1 + g;
            sds[j] = at;
            for (int k = 0; k < scs[j]; k++)
                sb[at + k] = t_rank * 1000 + j * 10 + k;
            at += scs[j];
        }
        at = 0;
        for (int j = 0; j < rn; j++) {
            rcs[j] = lme + 1 + (1 - g);
            rds[j] = at;
            at += rcs[j];
        }
        MPI_OK(MPI_Alltoallv(sb, scs, sds, MPI_INT, rb, rcs, rds, MPI_INT, ic));
        for (int j = 0; j < rn; j++)
            for (int k = 0; k < rcs[j]; k++)
                CHECKF(rb[rds[j] + k] == world(1 - g, j) * 1000 + lme * 10 + k, "alltoallv");
    }

    /* 2. Rooted operations, root = process 0 of group A.  Arguments that are
     * not significant get garbage: NULL buffers, negative counts,
     * MPI_DATATYPE_NULL (MPICH checks them: there, valid values). */
    int dummy[8];
    void *GB = is_madmpi() ? NULL : (void *)dummy;
    int GC = is_madmpi() ? -3 : 0;
    MPI_Datatype GT = is_madmpi() ? MPI_DATATYPE_NULL : MPI_INT;
    for (int nb = 0; nb < 2; nb++) {
        int root = g == 0 ? (lme == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        int idle = root == MPI_PROC_NULL;
        /* reduce: idle processes pass NULL, a garbage count, MPI_MAX on MPI_BYTE */
        int v[3] = {t_rank, 2 * t_rank, 3}, res[3] = {0, 0, 0};
        if (idle) {
            if (nb)
                MPI_OK(MPI_Ireduce(GB, GB, GC, MPI_BYTE, MPI_MAX, root, ic, &r));
            else
                MPI_OK(MPI_Reduce(GB, GB, GC, MPI_BYTE, MPI_MAX, root, ic));
        } else if (root == MPI_ROOT) {
            if (nb)
                MPI_OK(MPI_Ireduce(GB, res, 3, MPI_INT, MPI_SUM, root, ic, &r));
            else
                MPI_OK(MPI_Reduce(GB, res, 3, MPI_INT, MPI_SUM, root, ic));
        } else {
            if (nb)
                MPI_OK(MPI_Ireduce(v, GB, 3, MPI_INT, MPI_SUM, root, ic, &r));
            else
                MPI_OK(MPI_Reduce(v, GB, 3, MPI_INT, MPI_SUM, root, ic));
        }
        wait_or_not(nb, &r);
        if (root == MPI_ROOT) {
            int e0 = 0;
            for (int j = 0; j < rn; j++)
                e0 += world(1, j);
            CHECKF(res[0] == e0 && res[1] == 2 * e0 && res[2] == 3 * rn, "reduce: %d %d %d",
                   res[0], res[1], res[2]);
        }
        /* bcast: idle processes pass garbage */
        int bv = root == MPI_ROOT ? 4242 : -1;
        if (idle) {
            if (nb)
                MPI_OK(MPI_Ibcast(GB, GC, GT, root, ic, &r));
            else
                MPI_OK(MPI_Bcast(GB, GC, GT, root, ic));
        } else if (nb) {
            MPI_OK(MPI_Ibcast(&bv, 1, MPI_INT, root, ic, &r));
        } else {
            MPI_OK(MPI_Bcast(&bv, 1, MPI_INT, root, ic));
        }
        wait_or_not(nb, &r);
        if (g == 1)
            CHECK(bv == 4242);
        /* gather: the root sends nothing (NULL send buffer), idle ones pass garbage */
        for (int i = 0; i < 2 * rn; i++)
            rb[i] = -1;
        if (idle) {
            if (nb)
                MPI_OK(MPI_Igather(GB, GC, GT, GB, GC, GT, root,
                                   ic, &r));
            else
                MPI_OK(MPI_Gather(GB, GC, GT, GB, GC, GT, root,
                                  ic));
        } else if (root == MPI_ROOT) {
            if (nb)
                MPI_OK(MPI_Igather(GB, GC, GT, rb, 2, MPI_INT, root, ic, &r));
            else
                MPI_OK(MPI_Gather(GB, GC, GT, rb, 2, MPI_INT, root, ic));
        } else {
            int two[2] = {t_rank, -t_rank};
            if (nb)
                MPI_OK(MPI_Igather(two, 2, MPI_INT, GB, GC, GT, root, ic, &r));
            else
                MPI_OK(MPI_Gather(two, 2, MPI_INT, GB, GC, GT, root, ic));
        }
        wait_or_not(nb, &r);
        if (root == MPI_ROOT)
            for (int j = 0; j < rn; j++)
                CHECK(rb[2 * j] == world(1, j) && rb[2 * j + 1] == -world(1, j));
        /* scatter: the root receives nothing (NULL receive buffer) */
        for (int j = 0; j < rn; j++)
            sb[j] = 7000 + j;
        int got = -1;
        if (idle) {
            if (nb)
                MPI_OK(MPI_Iscatter(GB, GC, GT, GB, GC, GT, root,
                                    ic, &r));
            else
                MPI_OK(MPI_Scatter(GB, GC, GT, GB, GC, GT, root,
                                   ic));
        } else if (root == MPI_ROOT) {
            if (nb)
                MPI_OK(MPI_Iscatter(sb, 1, MPI_INT, GB, GC, GT, root, ic, &r));
            else
                MPI_OK(MPI_Scatter(sb, 1, MPI_INT, GB, GC, GT, root, ic));
        } else {
            if (nb)
                MPI_OK(MPI_Iscatter(GB, GC, GT, &got, 1, MPI_INT, root, ic, &r));
            else
                MPI_OK(MPI_Scatter(GB, GC, GT, &got, 1, MPI_INT, root, ic));
        }
        wait_or_not(nb, &r);
        if (g == 1)
            CHECK(got == 7000 + lme);
        /* gatherv / scatterv: idle ones pass NULL count arrays */
        if (idle) {
            MPI_OK(MPI_Gatherv(GB, GC, GT, GB, NULL, NULL, GT,
                               root, ic));
            MPI_OK(MPI_Scatterv(GB, NULL, NULL, GT, GB, GC, GT,
                                root, ic));
        } else if (root == MPI_ROOT) {
            int cs[8], ds[8];
            for (int j = 0; j < rn; j++) {
                cs[j] = 1;
                ds[j] = j;
            }
            MPI_OK(MPI_Gatherv(GB, GC, GT, rb, cs, ds, MPI_INT, root, ic));
            for (int j = 0; j < rn; j++)
                CHECK(rb[j] == world(1, j));
            MPI_OK(MPI_Scatterv(sb, cs, ds, MPI_INT, GB, GC, GT, root, ic));
        } else {
            int me1 = t_rank;
            MPI_OK(MPI_Gatherv(&me1, 1, MPI_INT, GB, NULL, NULL, GT, root, ic));
            MPI_OK(MPI_Scatterv(GB, NULL, NULL, GT, &got, 1, MPI_INT, root, ic));
            CHECK(got == 7000 + lme);
        }
        MPI_OK(MPI_Barrier(ic));
    }
    /* 3. The others still work: allreduce and barrier across the groups. */
    {
        int one = 1, s = 0;
        MPI_OK(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, ic));
        CHECK(s == rn);
        MPI_OK(MPI_Ibarrier(ic, &r));
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    free(sb);
    free(rb);
    MPI_OK(MPI_Comm_free(&ic));
    MPI_OK(MPI_Comm_free(&half));
    t_done("intersig");
    return 0;
}
