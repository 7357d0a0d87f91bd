/* inter.c - intercommunicators: MPI_Intercomm_create between the even and
 * the odd ranks of MPI_COMM_WORLD (leaders: their rank 0; remote leaders
 * named in MPI_COMM_WORLD), remote size and group, point-to-point across,
 * the collectives (barrier, bcast, gather(v), scatter(v), allgather(v),
 * alltoall(v, w), reduce, allreduce; blocking and non-blocking) with
 * MPI_ROOT / MPI_PROC_NULL roots, MPI_Comm_dup of an intercommunicator,
 * MPI_Intercomm_merge with both orderings, comparisons. Needs 2 ranks or more.
 */
#include "coll.h"

static int color, lsize, rsize, lrank;

/* World rank of rank r of group g (0: even ranks, 1: odd ranks). */
static int world_of(int g, int r)
{
    return 2 * r + g;
}

static void collectives(MPI_Comm ic)
{
    int x, y, z0 = 0, *buf, *big;
    /* barrier */
    MPI_OK(MPI_Barrier(ic));
    /* bcast from rank 1 (or 0) of group 0 to group 1, then back from group 1 */
    for (int g = 0; g < 2; g++) {
        int gsize = color == g ? lsize : rsize;
        int root = gsize > 1 ? 1 : 0;
        x = -1;
        if (color == g)
            x = lrank == root ? 1000 + g : -1;
        int rarg = color == g ? (lrank == root ? MPI_ROOT : MPI_PROC_NULL) : root;
        MPI_OK(MPI_Bcast(&x, 1, MPI_INT, rarg, ic));
        if (color != g)
            CHECKF(x == 1000 + g, "bcast from group %d got %d", g, x);
        else if (lrank != root)
            CHECK(x == -1);
    }
    /* allreduce: each group gets the sum of the other group's world ranks */
    x = t_rank;
    MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, ic));
    int e = 0;
    for (int r = 0; r < rsize; r++)
        e += world_of(1 - color, r);
    CHECKF(y == e, "allreduce %d != %d", y, e);
    /* reduce to rank 0 of group 1 */
    y = -1;
    /* (MPICH checks the insignificant buffers for NULL: pass real ones) */
    if (color == 0)
        MPI_OK(MPI_Reduce(&x, &z0, 1, MPI_INT, MPI_MAX, 0, ic));
    else
        MPI_OK(MPI_Reduce(&z0, &y, 1, MPI_INT, MPI_MAX, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
    if (color == 1 && lrank == 0)
        CHECK(y == world_of(0, rsize - 1));
    /* gather to rank 0 of group 0, scatter back */
    buf = xmalloc(sizeof(int) * 2 * (size_t)(rsize + lsize));
    big = xmalloc(sizeof(int) * 2 * (size_t)(rsize + lsize));
    if (color == 0) {
        for (int i = 0; i < 2 * rsize; i++)
            buf[i] = -1;
        MPI_OK(MPI_Gather(NULL, 0, MPI_INT, buf, 2, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
        if (lrank == 0)
            for (int r = 0; r < rsize; r++)
                CHECK(buf[2 * r] == world_of(1, r) && buf[2 * r + 1] == -world_of(1, r));
    } else {
        int mine[2] = {t_rank, -t_rank};
        MPI_OK(MPI_Gather(mine, 2, MPI_INT, NULL, 0, MPI_INT, 0, ic));
    }
    if (color == 0) {
        for (int r = 0; r < rsize; r++)
            buf[r] = 7 * world_of(1, r);
        MPI_OK(MPI_Scatter(buf, 1, MPI_INT, NULL, 0, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
    } else {
        y = -1;
        MPI_OK(MPI_Scatter(NULL, 0, MPI_INT, &y, 1, MPI_INT, 0, ic));
        CHECK(y == 7 * t_rank);
    }
    /* gatherv / scatterv with r + 1 elements from remote rank r */
    int *cnts = xmalloc(sizeof(int) * (size_t)rsize), *displs = xmalloc(sizeof(int) * (size_t)rsize);
    int at = 0;
    for (int r = 0; r < rsize; r++) {
        cnts[r] = r + 1;
        displs[r] = at;
        at += r + 1;
    }
    int *v = xmalloc(sizeof(int) * (size_t)(at + lsize + 1));
    if (color == 1) {
        if (lrank == 0) {
            MPI_OK(MPI_Gatherv(NULL, 0, MPI_INT, v, cnts, displs, MPI_INT, MPI_ROOT, ic));
            for (int r = 0; r < rsize; r++)
                for (int i = 0; i <= r; i++)
                    CHECK(v[displs[r] + i] == world_of(0, r) * 10 + i);
            MPI_OK(MPI_Scatterv(v, cnts, displs, MPI_INT, NULL, 0, MPI_INT, MPI_ROOT, ic));
        } else {
            MPI_OK(MPI_Gatherv(NULL, 0, MPI_INT, NULL, NULL, NULL, MPI_INT, MPI_PROC_NULL, ic));
            MPI_OK(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, NULL, 0, MPI_INT, MPI_PROC_NULL, ic));
        }
    } else {
        for (int i = 0; i <= lrank; i++)
            v[i] = t_rank * 10 + i;
        MPI_OK(MPI_Gatherv(v, lrank + 1, MPI_INT, NULL, NULL, NULL, MPI_INT, 0, ic));
        for (int i = 0; i <= lrank; i++)
            v[i] = -1;
        MPI_OK(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, v, lrank + 1, MPI_INT, 0, ic));
        for (int i = 0; i <= lrank; i++)
            CHECK(v[i] == t_rank * 10 + i);
    }
    /* allgather: every process gets the other group's blocks */
    int mine[2] = {t_rank, t_rank + 100};
    MPI_OK(MPI_Allgather(mine, 2, MPI_INT, buf, 2, MPI_INT, ic));
    for (int r = 0; r < rsize; r++)
        CHECK(buf[2 * r] == world_of(1 - color, r) && buf[2 * r + 1] == world_of(1 - color, r) + 100);
    /* allgatherv: remote r contributes r + 1 copies of its world rank */
    for (int i = 0; i <= lrank; i++)
        v[i] = t_rank;
    MPI_OK(MPI_Allgatherv(v, lrank + 1, MPI_INT, big, cnts, displs, MPI_INT, ic));
    for (int r = 0; r < rsize; r++)
        for (int i = 0; i <= r; i++)
            CHECK(big[displs[r] + i] == world_of(1 - color, r));
    /* alltoall: to remote r goes 1000 * me + r */
    for (int r = 0; r < rsize; r++)
        buf[r] = 1000 * t_rank + world_of(1 - color, r);
    MPI_OK(MPI_Alltoall(buf, 1, MPI_INT, big, 1, MPI_INT, ic));
    for (int r = 0; r < rsize; r++)
        CHECK(big[r] == 1000 * world_of(1 - color, r) + t_rank);
    /* alltoallv / alltoallw with one element each */
    int *one = xmalloc(sizeof(int) * (size_t)rsize), *dsp = xmalloc(sizeof(int) * (size_t)rsize);
    int *dspb = xmalloc(sizeof(int) * (size_t)rsize);
    MPI_Datatype *ty = xmalloc(sizeof(MPI_Datatype) * (size_t)rsize);
    for (int r = 0; r < rsize; r++) {
        one[r] = 1;
        dsp[r] = r;
        dspb[r] = r * (int)sizeof(int);
        ty[r] = MPI_INT;
    }
    MPI_OK(MPI_Alltoallv(buf, one, dsp, MPI_INT, big, one, dsp, MPI_INT, ic));
    for (int r = 0; r < rsize; r++)
        CHECK(big[r] == 1000 * world_of(1 - color, r) + t_rank);
    MPI_OK(MPI_Alltoallw(buf, one, dspb, ty, big, one, dspb, ty, ic));
    for (int r = 0; r < rsize; r++)
        CHECK(big[r] == 1000 * world_of(1 - color, r) + t_rank);
    /* non-blocking: iallreduce and ibcast in flight together */
    MPI_Request rq[2];
    MPI_Status sts[2];
    x = t_rank + 1;
    int z = color == 1 ? 77 : -1;
    MPI_OK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_MAX, ic, &rq[0]));
    MPI_OK(MPI_Ibcast(&z, 1, MPI_INT, color == 1 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0, ic, &rq[1]));
    MPI_OK(MPI_Waitall(2, rq, sts));
    CHECK(y == world_of(1 - color, rsize - 1) + 1);
    CHECK(z == 77 || (color == 1 && lrank != 0));
    free(buf);
    free(big);
    free(cnts);
    free(displs);
    free(v);
    free(one);
    free(dsp);
    free(dspb);
    free(ty);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size < 2) {
        t_done("inter");
        return 0;
    }
    color = t_rank % 2;
    MPI_Comm local, ic, ic2, merged;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, color, t_rank, &local));
    MPI_OK(MPI_Comm_size(local, &lsize));
    MPI_OK(MPI_Comm_rank(local, &lrank));
    /* leaders: local rank 0 (world 0 and 1); tag 12 on MPI_COMM_WORLD */
    MPI_OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 12, &ic));
    int flag = 0, sz, rk;
    MPI_OK(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag == 1);
    MPI_OK(MPI_Comm_remote_size(ic, &rsize));
    CHECK(rsize == (color == 0 ? t_size / 2 : (t_size + 1) / 2));
    MPI_OK(MPI_Comm_size(ic, &sz));
    MPI_OK(MPI_Comm_rank(ic, &rk));
    CHECK(sz == lsize && rk == lrank);
    MPI_Group rg, wg;
    MPI_OK(MPI_Comm_remote_group(ic, &rg));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    int *idx = xmalloc(sizeof(int) * (size_t)rsize), *wr = xmalloc(sizeof(int) * (size_t)rsize);
    for (int i = 0; i < rsize; i++)
        idx[i] = i;
    MPI_OK(MPI_Group_translate_ranks(rg, rsize, idx, wg, wr));
    for (int i = 0; i < rsize; i++)
        CHECK(wr[i] == world_of(1 - color, i));
    MPI_OK(MPI_Group_free(&rg));
    MPI_OK(MPI_Group_free(&wg));

    /* point to point: local rank r talks to remote rank r (when it exists) */
    if (lrank < rsize) {
        int out = t_rank, in = -1;
        MPI_OK(MPI_Sendrecv(&out, 1, MPI_INT, lrank, 3, &in, 1, MPI_INT, lrank, 3, ic, MPI_STATUS_IGNORE));
        CHECK(in == world_of(1 - color, lrank));
    }

    collectives(ic);

    /* dup of an intercommunicator */
    MPI_OK(MPI_Comm_dup(ic, &ic2));
    int res;
    MPI_OK(MPI_Comm_compare(ic, ic2, &res));
    CHECK(res == MPI_CONGRUENT);
    collectives(ic2);

    /* merge: group 1 first when it passes high = 0 */
    for (int h = 0; h < 2; h++) {
        int high = h == 0 ? (color == 0) : (color == 1);
        MPI_OK(MPI_Intercomm_merge(ic2, high, &merged));
        MPI_OK(MPI_Comm_size(merged, &sz));
        MPI_OK(MPI_Comm_rank(merged, &rk));
        CHECK(sz == t_size);
        int low_group = h == 0 ? 1 : 0;
        int low_size = low_group == color ? lsize : rsize;
        CHECKF(rk == (color == low_group ? lrank : low_size + lrank), "merge h %d: rank %d", h, rk);
        int x = t_rank, y = 0;
        MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, merged));
        CHECK(y == t_size * (t_size - 1) / 2);
        MPI_OK(MPI_Comm_free(&merged));
    }
    MPI_OK(MPI_Comm_free(&ic2));
    MPI_OK(MPI_Comm_free(&ic));
    MPI_OK(MPI_Comm_free(&local));
    free(idx);
    free(wr);
    t_done("inter");
    return 0;
}
