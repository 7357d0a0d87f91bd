/* topo.c - process topologies: MPI_Dims_create against known answers,
 * Cartesian grids (create, get, coords/rank, shift, sub, map), graphs,
 * distributed graphs (adjacent and general), MPI_Topo_test, and every
 * neighbourhood collective (allgather(v), alltoall(v, w), blocking and
 * non-blocking) on grids — including periodic dimensions of size 1 and 2,
 * where both neighbours are the same process — and on graphs.
 */
#include "coll.h"

static void dims(int nn, int nd, const int *in, const int *want)
{
    int d[4];
    memcpy(d, in, sizeof(int) * (size_t)nd);
    MPI_OK(MPI_Dims_create(nn, nd, d));
    for (int i = 0; i < nd; i++)
        CHECKF(d[i] == want[i], "Dims_create(%d, %d): dim %d is %d, expected %d", nn, nd, i, d[i], want[i]);
}

static void test_dims(void)
{
    dims(6, 2, (int[]){0, 0}, (int[]){3, 2});
    dims(7, 2, (int[]){0, 0}, (int[]){7, 1});
    dims(12, 3, (int[]){0, 0, 0}, (int[]){3, 2, 2});
    dims(16, 2, (int[]){0, 0}, (int[]){4, 4});
    dims(24, 3, (int[]){0, 0, 0}, (int[]){4, 3, 2});
    dims(36, 3, (int[]){0, 0, 0}, (int[]){4, 3, 3});
    dims(8, 3, (int[]){0, 0, 0}, (int[]){2, 2, 2});
    dims(12, 3, (int[]){0, 3, 0}, (int[]){2, 3, 2});
    dims(1, 2, (int[]){0, 0}, (int[]){1, 1});
    dims(60, 3, (int[]){0, 0, 0}, (int[]){5, 4, 3});
    dims(30, 2, (int[]){0, 0}, (int[]){6, 5});
    dims(4, 1, (int[]){0}, (int[]){4});
    if (is_madmpi()) {
        int d[2] = {3, 0};
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        EXPECT_CLASS(MPI_Dims_create(10, 2, d), MPI_ERR_DIMS);
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    }
}

/* Neighbourhood collectives on a grid: what comes from neighbour k is what
 * that neighbour sent towards this process, block k ^ 1 of its own. */
static void grid_neighbors(MPI_Comm c, int nd)
{
    int me, nn = 2 * nd, src[8], dst[8];
    MPI_OK(MPI_Comm_rank(c, &me));
    for (int d = 0; d < nd; d++)
        MPI_OK(MPI_Cart_shift(c, d, 1, &src[2 * d], &dst[2 * d + 1]));
    for (int d = 0; d < nd; d++) {
        dst[2 * d] = src[2 * d];
        src[2 * d + 1] = dst[2 * d + 1];
    }
    int sb[16], rb[16], rb2[16];
    /* allgather: my rank to everyone */
    for (int k = 0; k < nn; k++)
        rb[k] = -7;
    MPI_OK(MPI_Neighbor_allgather(&me, 1, MPI_INT, rb, 1, MPI_INT, c));
    for (int k = 0; k < nn; k++)
        CHECKF(rb[k] == (src[k] == MPI_PROC_NULL ? -7 : src[k]), "grid allgather k %d: %d", k, rb[k]);
    /* alltoall: block k = (me, k) */
    for (int k = 0; k < nn; k++) {
        sb[2 * k] = me;
        sb[2 * k + 1] = k;
        rb[2 * k] = rb[2 * k + 1] = -7;
    }
    MPI_OK(MPI_Neighbor_alltoall(sb, 2, MPI_INT, rb, 2, MPI_INT, c));
    for (int k = 0; k < nn; k++) {
        if (src[k] == MPI_PROC_NULL)
            CHECK(rb[2 * k] == -7);
        else if (is_madmpi() || src[k] != src[k ^ 1]) /* (as below) */
            CHECKF(rb[2 * k] == src[k] && rb[2 * k + 1] == (k ^ 1), "grid alltoall k %d: (%d, %d)", k, rb[2 * k],
                   rb[2 * k + 1]);
    }
    /* the v and w forms, and non-blocking ones, in flight together */
    int cnt[8], dsp[8], dspb[8];
    MPI_Datatype ty[8];
    MPI_Aint adsp[8];
    for (int k = 0; k < nn; k++) {
        cnt[k] = 2;
        dsp[k] = 2 * (nn - 1 - k);
        dspb[k] = dsp[k] * (int)sizeof(int);
        adsp[k] = dspb[k];
        ty[k] = MPI_INT;
        rb2[2 * k] = rb2[2 * k + 1] = -7;
    }
    for (int k = 0; k < 2 * nn; k++)
        rb[k] = -7;
    MPI_Request rq[3];
    MPI_Status sts[3];
    MPI_OK(MPI_Ineighbor_alltoallv(sb, cnt, (int[]){0, 2, 4, 6, 8, 10, 12, 14}, MPI_INT, rb, cnt, dsp, MPI_INT, c, &rq[0]));
    MPI_OK(MPI_Ineighbor_alltoallw(sb, cnt, (MPI_Aint[]){0, 8, 16, 24, 32, 40, 48, 56}, ty, rb2, cnt, adsp, ty, c, &rq[1]));
    int ag[8];
    for (int k = 0; k < nn; k++)
        ag[k] = -7;
    MPI_OK(MPI_Ineighbor_allgatherv(&me, 1, MPI_INT, ag, (int[]){1, 1, 1, 1, 1, 1, 1, 1}, (int[]){0, 1, 2, 3, 4, 5, 6, 7},
                                    MPI_INT, c, &rq[2]));
    MPI_OK(MPI_Waitall(3, rq, sts));
    for (int k = 0; k < nn; k++) {
        if (src[k] == MPI_PROC_NULL)
            continue;
        /* (MPICH 4.0's non-blocking forms mix up the two directions when both
         * neighbours are the same process: madmpi only) */
        if (!is_madmpi() && src[k] == src[k ^ 1])
            continue;
        CHECKF(rb[dsp[k]] == src[k] && rb[dsp[k] + 1] == (k ^ 1), "alltoallv k %d", k);
        CHECKF(rb2[dsp[k]] == src[k] && rb2[dsp[k] + 1] == (k ^ 1), "alltoallw k %d", k);
        CHECK(ag[k] == src[k]);
    }
    (void)dspb;
}

static void test_cart(void)
{
    int n = t_size, me = t_rank;
    int d[2] = {0, 0}, per[2] = {1, 0}, st, nd, rk;
    MPI_OK(MPI_Dims_create(n, 2, d));
    MPI_Comm c, row, col, one;
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 2, d, per, 1, &c));
    MPI_OK(MPI_Topo_test(c, &st));
    CHECK(st == MPI_CART);
    MPI_OK(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK(st == MPI_UNDEFINED);
    MPI_OK(MPI_Cartdim_get(c, &nd));
    CHECK(nd == 2);
    int gd[2], gp[2], gc[2];
    MPI_OK(MPI_Cart_get(c, 2, gd, gp, gc));
    CHECK(gd[0] == d[0] && gd[1] == d[1] && gp[0] == 1 && gp[1] == 0);
    MPI_OK(MPI_Comm_rank(c, &rk));
    CHECK(gc[0] == rk / d[1] && gc[1] == rk % d[1]);
    for (int r = 0; r < n; r++) {
        int co[2], back;
        MPI_OK(MPI_Cart_coords(c, r, 2, co));
        CHECK(co[0] == r / d[1] && co[1] == r % d[1]);
        MPI_OK(MPI_Cart_rank(c, co, &back));
        CHECK(back == r);
    }
    {
        int co[2] = {-1, 0}, r;
        MPI_OK(MPI_Cart_rank(c, co, &r)); /* periodic dimension wraps */
        CHECK(r == (d[0] - 1) * d[1]);
        /* out of range in the non-periodic one: MPI_ERR_ARG, as in MPICH and Open MPI */
        int off[2] = {0, d[1]};
        MPI_OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
        EXPECT_CLASS(MPI_Cart_rank(c, off, &r), MPI_ERR_ARG);
        MPI_OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_ARE_FATAL));
    }
    int s, t;
    MPI_OK(MPI_Cart_shift(c, 0, 1, &s, &t));
    CHECK(s == ((gc[0] - 1 + d[0]) % d[0]) * d[1] + gc[1] && t == ((gc[0] + 1) % d[0]) * d[1] + gc[1]);
    MPI_OK(MPI_Cart_shift(c, 1, 1, &s, &t));
    CHECK(s == (gc[1] == 0 ? MPI_PROC_NULL : rk - 1) && t == (gc[1] == d[1] - 1 ? MPI_PROC_NULL : rk + 1));
    grid_neighbors(c, 2);
    /* rows and columns */
    MPI_OK(MPI_Cart_sub(c, (int[]){0, 1}, &row));
    MPI_OK(MPI_Cart_sub(c, (int[]){1, 0}, &col));
    int rs, cs, rr;
    MPI_OK(MPI_Comm_size(row, &rs));
    MPI_OK(MPI_Comm_size(col, &cs));
    MPI_OK(MPI_Comm_rank(row, &rr));
    CHECK(rs == d[1] && cs == d[0] && rr == gc[1]);
    MPI_OK(MPI_Cartdim_get(row, &nd));
    CHECK(nd == 1);
    int sum = 0;
    MPI_OK(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, row));
    int e = 0;
    for (int j = 0; j < d[1]; j++)
        e += gc[0] * d[1] + j;
    CHECK(sum == e);
    grid_neighbors(col, 1);
    MPI_OK(MPI_Comm_free(&row));
    MPI_OK(MPI_Comm_free(&col));
    MPI_OK(MPI_Comm_free(&c));

    /* periodic dimensions of size 1 and 2 (the same process on both sides) */
    int d3[3] = {n, 1, 1}, p3[3] = {1, 1, 0};
    if (n % 2 == 0) {
        d3[0] = n / 2;
        d3[1] = 2;
    }
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 3, d3, p3, 0, &one));
    grid_neighbors(one, 3);
    MPI_OK(MPI_Comm_free(&one));

    /* a grid smaller than the communicator */
    if (n > 1) {
        int d1[1] = {n - 1}, p1[1] = {0}, nr;
        MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, d1, p1, 0, &c));
        CHECK((me == n - 1) == (c == MPI_COMM_NULL));
        if (c != MPI_COMM_NULL)
            MPI_OK(MPI_Comm_free(&c));
        MPI_OK(MPI_Cart_map(MPI_COMM_WORLD, 1, d1, p1, &nr));
        CHECK(nr == (me == n - 1 ? MPI_UNDEFINED : me));
    }
    /* a grid with a dimension of 0 has no process: MPI_UNDEFINED everywhere
     * (MPICH; Open MPI 4.1 gives 0) */
    {
        int d2[2] = {2, 0}, p2[2] = {0, 0}, nr = 5;
        MPI_OK(MPI_Cart_map(MPI_COMM_WORLD, 2, d2, p2, &nr));
        CHECKF(nr == MPI_UNDEFINED, "Cart_map of a 2x0 grid: %d", nr);
    }
}

static void test_graph(void)
{
    int n = t_size, me = t_rank, st;
    /* a ring: node i is linked to i + 1 and i - 1 */
    int *index = xmalloc(sizeof(int) * (size_t)n), *edges = xmalloc(sizeof(int) * 2 * (size_t)n);
    for (int i = 0; i < n; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + 1) % n;
        edges[2 * i + 1] = (i + n - 1) % n;
    }
    MPI_Comm g;
    MPI_OK(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    MPI_OK(MPI_Topo_test(g, &st));
    CHECK(st == MPI_GRAPH);
    int nn, ne, cnt, nb[2];
    MPI_OK(MPI_Graphdims_get(g, &nn, &ne));
    CHECK(nn == n && ne == 2 * n);
    int *gi = xmalloc(sizeof(int) * (size_t)n), *ge = xmalloc(sizeof(int) * 2 * (size_t)n);
    MPI_OK(MPI_Graph_get(g, n, 2 * n, gi, ge));
    CHECK(memcmp(gi, index, sizeof(int) * (size_t)n) == 0 && memcmp(ge, edges, sizeof(int) * 2 * (size_t)n) == 0);
    MPI_OK(MPI_Graph_neighbors_count(g, me, &cnt));
    CHECK(cnt == 2);
    MPI_OK(MPI_Graph_neighbors(g, me, 2, nb));
    CHECK(nb[0] == (me + 1) % n && nb[1] == (me + n - 1) % n);
    int nr;
    MPI_OK(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &nr));
    CHECK(nr == me);
    int rb[2] = {-1, -1};
    MPI_OK(MPI_Neighbor_allgather(&me, 1, MPI_INT, rb, 1, MPI_INT, g));
    CHECK(rb[0] == nb[0] && rb[1] == nb[1]);
    MPI_OK(MPI_Comm_free(&g));
    free(index);
    free(edges);
    free(gi);
    free(ge);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void test_dist_graph(void)
{
    int n = t_size, me = t_rank, st, in, out, w;
    /* adjacent: a directed ring with weights */
    int s1 = (me + n - 1) % n, d1 = (me + 1) % n, sw = 10 + s1, dw = 10 + me;
    MPI_Comm g;
    MPI_OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &s1, &sw, 1, &d1, &dw, MPI_INFO_NULL, 0, &g));
    MPI_OK(MPI_Topo_test(g, &st));
    CHECK(st == MPI_DIST_GRAPH);
    MPI_OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECK(in == 1 && out == 1 && w);
    int gs, gsw, gd, gdw;
    MPI_OK(MPI_Dist_graph_neighbors(g, 1, &gs, &gsw, 1, &gd, &gdw));
    CHECK(gs == s1 && gsw == sw && gd == d1 && gdw == dw);
    int x[2] = {me, 5}, y[2] = {-1, -1};
    MPI_OK(MPI_Neighbor_alltoall(x, 2, MPI_INT, y, 2, MPI_INT, g));
    CHECK(y[0] == s1 && y[1] == 5);
    MPI_Request rq;
    MPI_OK(MPI_Ineighbor_allgather(&me, 1, MPI_INT, y, 1, MPI_INT, g, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(y[0] == s1);
    MPI_OK(MPI_Comm_free(&g));

    /* no edges, MPI_WEIGHTS_EMPTY: a weighted graph (MPICH, Open MPI) */
    MPI_OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, NULL, MPI_WEIGHTS_EMPTY, 0, NULL,
                                          MPI_WEIGHTS_EMPTY, MPI_INFO_NULL, 0, &g));
    w = -1;
    MPI_OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECKF(in == 0 && out == 0 && w == 1, "MPI_WEIGHTS_EMPTY: %d %d weighted %d", in, out, w);
    MPI_OK(MPI_Comm_free(&g));
    MPI_OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, NULL, MPI_UNWEIGHTED, 0, NULL,
                                          MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g));
    MPI_OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECK(in == 0 && out == 0 && w == 0);
    MPI_OK(MPI_Comm_free(&g));

    /* general: rank r declares the edges r -> r+1 and r -> r+2 */
    int srcs[1] = {me}, deg[1] = {2}, dst[2] = {(me + 1) % n, (me + 2) % n};
    MPI_OK(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, srcs, deg, dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g));
    MPI_OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &w));
    CHECK(in == 2 && out == 2 && !w);
    int ins[2], outs[2];
    MPI_OK(MPI_Dist_graph_neighbors(g, 2, ins, MPI_UNWEIGHTED, 2, outs, MPI_UNWEIGHTED));
    qsort(ins, 2, sizeof(int), cmp_int);
    int e_in[2] = {(me + n - 1) % n, (me + n - 2) % n};
    qsort(e_in, 2, sizeof(int), cmp_int);
    CHECK(ins[0] == e_in[0] && ins[1] == e_in[1]);
    int got[2] = {-1, -1};
    MPI_OK(MPI_Neighbor_allgather(&me, 1, MPI_INT, got, 1, MPI_INT, g));
    MPI_OK(MPI_Dist_graph_neighbors(g, 2, ins, MPI_UNWEIGHTED, 2, outs, MPI_UNWEIGHTED));
    CHECK(got[0] == ins[0] && got[1] == ins[1]);
    MPI_OK(MPI_Comm_free(&g));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    test_dims();
    test_cart();
    test_graph();
    test_dist_graph();
    t_done("topo");
    return 0;
}
