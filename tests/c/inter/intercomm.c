/* intercomm.c - intercommunicator operations beyond intercomm.c's basics:
 * reduce-scatter (MPI_Reduce_scatter, MPI_Reduce_scatter_block; blocking,
 * non-blocking and persistent; commutative and non-commutative operations,
 * uneven and zero counts, a strided datatype, a long message), MPI_Comm_split
 * (several colors, MPI_UNDEFINED, a color used by one group only),
 * MPI_Comm_create (subgroups in a new order, MPI_GROUP_EMPTY on one side),
 * MPI_Comm_split_type, and the error classes of the erroneous calls under
 * MPI_ERRORS_RETURN. Results are checked against a sequential reference.
 *
 * argv[1] chooses how MPI_COMM_WORLD is cut in two: "low" (default: group 0
 * is world ranks 0 .. a - 1 with a = (size - 1) / 2, max 1, so the groups
 * have uneven sizes) or "interleaved" (group 0: even world ranks). Needs 2
 * ranks or more.
 */
#include "../coll/coll.h"

static int g, lsize, rsize, lrank, split_a, interleaved;

/* World rank of rank r of group h. */
static int world_of(int h, int r)
{
    if (interleaved)
        return 2 * r + h;
    return h == 0 ? r : split_a + r;
}

static int group_size(int h)
{
    return h == g ? lsize : rsize;
}

/* ------------------------------------------------------------ reduce-scatter */

/* Non-commutative, associative: composition of affine maps x -> a x + b
 * (mod 1009), on MPI_2INT pairs (a, b). inout = in o inout. */
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        int a = x[2 * i], b = x[2 * i + 1], c = y[2 * i], d = y[2 * i + 1];
        y[2 * i] = (a * c) % 1009;
        y[2 * i + 1] = (a * d + b) % 1009;
    }
}

static int affine_a(int w, int i)
{
    return 1 + (w * 37 + i * 11) % 1000;
}

static int affine_b(int w, int i)
{
    return (w * 53 + i * 17 + 5) % 1009;
}

/* Block counts of this group for a vector of `total` elements: uneven, with a
 * zero count when the group has 3 processes or more. */
static void uneven_counts(int n, int total, int *counts)
{
    int used = 0;
    for (int r = 0; r < n - 1; r++) {
        counts[r] = r == 0 ? 3 : r == 1 ? 0 : r;
        used += counts[r];
    }
    counts[n - 1] = total - used;
    CHECK(counts[n - 1] >= 0);
}

/* Sum over the other group of val(world rank, i, salt). */
static int remote_sum(int i, int salt)
{
    int e = 0;
    for (int p = 0; p < rsize; p++)
        e += val(world_of(1 - g, p), i, salt);
    return e;
}

/* MPI_SUM of ints, `counts` per local rank (NULL: block form with `block`). */
static void check_sum(MPI_Comm ic, int *counts, int block, int total, int salt)
{
    int *s = xmalloc(sizeof(int) * (size_t)total);
    int mine = counts ? counts[lrank] : block;
    int first = 0;
    for (int r = 0; r < lrank; r++)
        first += counts ? counts[r] : block;
    int *rb = xmalloc(sizeof(int) * (size_t)(mine + 1));
    for (int i = 0; i < total; i++)
        s[i] = val(t_rank, i, salt);
    for (int i = 0; i <= mine; i++)
        rb[i] = -7777;
    if (counts)
        MPI_OK(MPI_Reduce_scatter(s, rb, counts, MPI_INT, MPI_SUM, ic));
    else
        MPI_OK(MPI_Reduce_scatter_block(s, rb, block, MPI_INT, MPI_SUM, ic));
    for (int i = 0; i < mine; i++)
        CHECKF(rb[i] == remote_sum(first + i, salt), "salt %d element %d: got %d, expected %d",
               salt, first + i, rb[i], remote_sum(first + i, salt));
    CHECK(rb[mine] == -7777);
    free(s);
    free(rb);
}

static void reduce_scatter_tests(MPI_Comm ic)
{
    /* the same number of elements in both groups: a multiple of both sizes */
    int total = lsize * rsize * 2;
    int block = total / lsize;
    check_sum(ic, NULL, block, total, 1);
    int *counts = xmalloc(sizeof(int) * (size_t)lsize);
    uneven_counts(lsize, 13, counts);
    check_sum(ic, counts, 0, 13, 2);
    /* long: past the eager limit */
    int big = lsize * rsize * 8192;
    check_sum(ic, NULL, big / lsize, big, 3);
    /* zero elements */
    check_sum(ic, NULL, 0, 0, 4);

    /* non-commutative operation, in rank order of the other group */
    MPI_Op op;
    MPI_OK(MPI_Op_create(compose, 0, &op));
    int n = 2 * lsize * rsize, per = n / lsize;
    int *s = xmalloc(sizeof(int) * 2 * (size_t)n), *rb = xmalloc(sizeof(int) * 2 * (size_t)per);
    for (int i = 0; i < n; i++) {
        s[2 * i] = affine_a(t_rank, i);
        s[2 * i + 1] = affine_b(t_rank, i);
    }
    MPI_OK(MPI_Reduce_scatter_block(s, rb, per, MPI_2INT, op, ic));
    for (int j = 0; j < per; j++) {
        int i = lrank * per + j;
        int a = affine_a(world_of(1 - g, 0), i), b = affine_b(world_of(1 - g, 0), i);
        for (int p = 1; p < rsize; p++) {
            int c = affine_a(world_of(1 - g, p), i), d = affine_b(world_of(1 - g, p), i);
            b = (a * d + b) % 1009;
            a = (a * c) % 1009;
        }
        CHECKF(rb[2 * j] == a && rb[2 * j + 1] == b, "non-commutative element %d: (%d, %d) != (%d, %d)",
               i, rb[2 * j], rb[2 * j + 1], a, b);
    }
    /* uneven counts with the same operation (the v form's scatter) */
    int *vc = xmalloc(sizeof(int) * (size_t)lsize);
    uneven_counts(lsize, n, vc);
    int first = 0;
    for (int r = 0; r < lrank; r++)
        first += vc[r];
    int *rv = xmalloc(sizeof(int) * 2 * (size_t)(vc[lrank] + 1));
    MPI_OK(MPI_Reduce_scatter(s, rv, vc, MPI_2INT, op, ic));
    for (int j = 0; j < vc[lrank]; j++) {
        int i = first + j;
        int a = affine_a(world_of(1 - g, 0), i), b = affine_b(world_of(1 - g, 0), i);
        for (int p = 1; p < rsize; p++) {
            int c = affine_a(world_of(1 - g, p), i), d = affine_b(world_of(1 - g, p), i);
            b = (a * d + b) % 1009;
            a = (a * c) % 1009;
        }
        CHECK(rv[2 * j] == a && rv[2 * j + 1] == b);
    }
    MPI_OK(MPI_Op_free(&op));

    /* strided buffers: every other int (a predefined operation on a derived type: madmpi
     * only, MPICH rejects it) */
    if (is_madmpi()) {
    MPI_Datatype vec, strided;
    MPI_OK(MPI_Type_vector(1, 1, 2, MPI_INT, &vec));
    MPI_OK(MPI_Type_create_resized(vec, 0, 2 * (MPI_Aint)sizeof(int), &strided));
    MPI_OK(MPI_Type_commit(&strided));
    int *ss = xmalloc(sizeof(int) * 2 * (size_t)total), *rs = xmalloc(sizeof(int) * 2 * (size_t)block);
    for (int i = 0; i < total; i++) {
        ss[2 * i] = val(t_rank, i, 5);
        ss[2 * i + 1] = 999999;
    }
    for (int i = 0; i < 2 * block; i++)
        rs[i] = -1;
    MPI_OK(MPI_Reduce_scatter_block(ss, rs, block, strided, MPI_SUM, ic));
    for (int j = 0; j < block; j++) {
        CHECK(rs[2 * j] == remote_sum(lrank * block + j, 5));
        CHECK(rs[2 * j + 1] == -1);
    }
    MPI_OK(MPI_Type_free(&strided));
    MPI_OK(MPI_Type_free(&vec));
    free(ss);
    free(rs);
    }

    /* non-blocking, two in flight */
    int *s1 = xmalloc(sizeof(int) * (size_t)total), *s2 = xmalloc(sizeof(int) * 13);
    int *r1 = xmalloc(sizeof(int) * (size_t)block), *r2 = xmalloc(sizeof(int) * 14);
    for (int i = 0; i < total; i++)
        s1[i] = val(t_rank, i, 6);
    for (int i = 0; i < 13; i++)
        s2[i] = val(t_rank, i, 7);
    MPI_Request rq[2];
    MPI_Status sts[2];
    MPI_OK(MPI_Ireduce_scatter_block(s1, r1, block, MPI_INT, MPI_SUM, ic, &rq[0]));
    MPI_OK(MPI_Ireduce_scatter(s2, r2, counts, MPI_INT, MPI_SUM, ic, &rq[1]));
    MPI_OK(MPI_Waitall(2, rq, sts));
    for (int j = 0; j < block; j++)
        CHECK(r1[j] == remote_sum(lrank * block + j, 6));
    first = 0;
    for (int r = 0; r < lrank; r++)
        first += counts[r];
    for (int j = 0; j < counts[lrank]; j++)
        CHECK(r2[j] == remote_sum(first + j, 7));
    /* persistent, started twice (MPICH 4.2 fails it on intercommunicators: madmpi only) */
    if (is_madmpi()) {
        MPI_Request pr;
        MPI_OK(MPI_Reduce_scatter_block_init(s1, r1, block, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &pr));
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < block; j++)
                r1[j] = 0;
            MPI_OK(MPI_Start(&pr));
            MPI_OK(MPI_Wait(&pr, MPI_STATUS_IGNORE));
            for (int j = 0; j < block; j++)
                CHECK(r1[j] == remote_sum(lrank * block + j, 6));
        }
        MPI_OK(MPI_Request_free(&pr));
    }

    free(counts);
    free(s);
    free(rb);
    free(vc);
    free(rv);
    free(s1);
    free(s2);
    free(r1);
    free(r2);
}

/* ------------------------------------------------------------ new intercommunicators */

/* Check that `nc` is an intercommunicator whose local group is `lw` (world
 * ranks, in rank order) and remote group `rw`, and that point-to-point and
 * collectives work on it. */
static void check_inter(MPI_Comm nc, const int *lw, int nl, const int *rw, int nr)
{
    int flag = 0, sz, rk, rsz;
    MPI_OK(MPI_Comm_test_inter(nc, &flag));
    CHECK(flag == 1);
    MPI_OK(MPI_Comm_size(nc, &sz));
    MPI_OK(MPI_Comm_rank(nc, &rk));
    MPI_OK(MPI_Comm_remote_size(nc, &rsz));
    CHECKF(sz == nl && rsz == nr, "sizes %d/%d, expected %d/%d", sz, rsz, nl, nr);
    CHECKF(lw[rk] == t_rank, "rank %d is world %d, expected world %d", rk, lw[rk], t_rank);
    MPI_Group wg, lg, rg;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    MPI_OK(MPI_Comm_group(nc, &lg));
    MPI_OK(MPI_Comm_remote_group(nc, &rg));
    int *idx = xmalloc(sizeof(int) * (size_t)(nl + nr)), *tr = xmalloc(sizeof(int) * (size_t)(nl + nr));
    for (int i = 0; i < nl + nr; i++)
        idx[i] = i;
    MPI_OK(MPI_Group_translate_ranks(lg, nl, idx, wg, tr));
    for (int i = 0; i < nl; i++)
        CHECKF(tr[i] == lw[i], "local rank %d is world %d, expected %d", i, tr[i], lw[i]);
    MPI_OK(MPI_Group_translate_ranks(rg, nr, idx, wg, tr));
    for (int i = 0; i < nr; i++)
        CHECKF(tr[i] == rw[i], "remote rank %d is world %d, expected %d", i, tr[i], rw[i]);
    MPI_OK(MPI_Group_free(&wg));
    MPI_OK(MPI_Group_free(&lg));
    MPI_OK(MPI_Group_free(&rg));

    /* point to point: every process sends its world rank to every remote one */
    int *in = xmalloc(sizeof(int) * (size_t)nr);
    MPI_Request *rq = xmalloc(sizeof(MPI_Request) * 2 * (size_t)nr);
    MPI_Status *sts = xmalloc(sizeof(MPI_Status) * 2 * (size_t)nr);
    for (int j = 0; j < nr; j++) {
        in[j] = -1;
        MPI_OK(MPI_Irecv(&in[j], 1, MPI_INT, j, 40, nc, &rq[j]));
    }
    for (int j = 0; j < nr; j++)
        MPI_OK(MPI_Isend(&t_rank, 1, MPI_INT, j, 40, nc, &rq[nr + j]));
    MPI_OK(MPI_Waitall(2 * nr, rq, sts));
    for (int j = 0; j < nr; j++)
        CHECKF(in[j] == rw[j], "from remote %d: %d, expected %d", j, in[j], rw[j]);
    /* a wildcard receive only sees this communicator's messages */
    if (rk == 0) {
        MPI_Request sr;
        MPI_Status st;
        int y = -1;
        MPI_OK(MPI_Isend(&t_rank, 1, MPI_INT, 0, 41, nc, &sr));
        MPI_OK(MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, nc, &st));
        MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
        CHECK(y == rw[0] && st.MPI_SOURCE == 0 && st.MPI_TAG == 41);
    }
    /* collectives: allreduce and reduce-scatter see the remote group */
    int x = t_rank, y = 0, e = 0;
    for (int j = 0; j < nr; j++)
        e += rw[j];
    MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, nc));
    CHECKF(y == e, "allreduce %d != %d", y, e);
    int total = nl * nr;
    int *s = xmalloc(sizeof(int) * (size_t)total);
    for (int i = 0; i < total; i++)
        s[i] = t_rank * 100 + i;
    int *rr = xmalloc(sizeof(int) * (size_t)nr);
    MPI_OK(MPI_Reduce_scatter_block(s, rr, nr, MPI_INT, MPI_MAX, nc));
    int mx = rw[0];
    for (int j = 1; j < nr; j++)
        mx = rw[j] > mx ? rw[j] : mx;
    for (int j = 0; j < nr; j++)
        CHECK(rr[j] == mx * 100 + rk * nr + j);
    free(idx);
    free(tr);
    free(in);
    free(rq);
    free(sts);
    free(s);
    free(rr);
}

/* The split's colors: several, MPI_UNDEFINED in group 1, and color 7 in group
 * 1 only. */
static int color_of(int h, int r)
{
    int n = group_size(h);
    if (h == 1 && n > 2 && r == n - 1)
        return MPI_UNDEFINED;
    if (h == 1 && r == 1)
        return 7;
    return r % 2;
}

/* World ranks of the processes of group h with color c, by key (-r), then rank. */
static int members(int h, int c, int *out)
{
    int k = 0;
    for (int r = group_size(h) - 1; r >= 0; r--)
        if (color_of(h, r) == c)
            out[k++] = world_of(h, r);
    return k;
}

static void split_tests(MPI_Comm ic)
{
    int c = color_of(g, lrank);
    MPI_Comm nc;
    MPI_OK(MPI_Comm_split(ic, c, -lrank, &nc));
    int *lw = xmalloc(sizeof(int) * (size_t)t_size), *rw = xmalloc(sizeof(int) * (size_t)t_size);
    int nl = c == MPI_UNDEFINED ? 0 : members(g, c, lw);
    int nr = c == MPI_UNDEFINED ? 0 : members(1 - g, c, rw);
    if (nr == 0) {
        CHECKF(nc == MPI_COMM_NULL, "color %d: a communicator without a remote group", c);
    } else {
        CHECKF(nc != MPI_COMM_NULL, "color %d: MPI_COMM_NULL", c);
        check_inter(nc, lw, nl, rw, nr);
        /* split again: one color, keys in rank order (a split of a split) */
        MPI_Comm nc2;
        MPI_OK(MPI_Comm_split(nc, 0, 0, &nc2));
        int sz = 0, rk = -1, rk2 = -2;
        MPI_OK(MPI_Comm_rank(nc, &rk));
        MPI_OK(MPI_Comm_rank(nc2, &rk2));
        MPI_OK(MPI_Comm_remote_size(nc2, &sz));
        CHECK(rk == rk2 && sz == nr);
        MPI_OK(MPI_Comm_free(&nc2));
        MPI_OK(MPI_Comm_free(&nc));
    }
    /* everyone MPI_UNDEFINED */
    MPI_OK(MPI_Comm_split(ic, MPI_UNDEFINED, 0, &nc));
    CHECK(nc == MPI_COMM_NULL);
    /* one color everywhere, keys reversing group 0 only */
    MPI_OK(MPI_Comm_split(ic, 3, g == 0 ? -lrank : 0, &nc));
    for (int h = 0; h < 2; h++) {
        int *dst = h == g ? lw : rw;
        for (int r = 0; r < group_size(h); r++)
            dst[r] = world_of(h, h == 0 ? group_size(h) - 1 - r : r);
    }
    check_inter(nc, lw, lsize, rw, rsize);
    MPI_OK(MPI_Comm_free(&nc));
    free(lw);
    free(rw);
}

/* MPI_Comm_create's subgroup of group h: every other rank (starting at h % 2,
 * or all of a 1-process group), in reverse order. */
static int subgroup(int h, int *ranks)
{
    int k = 0, n = group_size(h);
    for (int r = n - 1; r >= 0; r--)
        if (n == 1 || r % 2 == h % 2)
            ranks[k++] = r;
    return k;
}

static void create_tests(MPI_Comm ic)
{
    MPI_Group lg, sub;
    MPI_OK(MPI_Comm_group(ic, &lg));
    int *ranks = xmalloc(sizeof(int) * (size_t)t_size);
    int k = subgroup(g, ranks);
    MPI_OK(MPI_Group_incl(lg, k, ranks, &sub));
    MPI_Comm nc;
    MPI_OK(MPI_Comm_create(ic, sub, &nc));
    int in = 0;
    for (int i = 0; i < k; i++)
        in |= ranks[i] == lrank;
    if (!in) {
        CHECK(nc == MPI_COMM_NULL);
    } else {
        CHECK(nc != MPI_COMM_NULL);
        int *lw = xmalloc(sizeof(int) * (size_t)t_size), *rw = xmalloc(sizeof(int) * (size_t)t_size);
        int *rr = xmalloc(sizeof(int) * (size_t)t_size);
        for (int i = 0; i < k; i++)
            lw[i] = world_of(g, ranks[i]);
        int kr = subgroup(1 - g, rr);
        for (int i = 0; i < kr; i++)
            rw[i] = world_of(1 - g, rr[i]);
        check_inter(nc, lw, k, rw, kr);
        MPI_OK(MPI_Comm_free(&nc));
        free(lw);
        free(rw);
        free(rr);
    }
    /* group 0 passes MPI_GROUP_EMPTY: nobody gets a communicator */
    MPI_OK(MPI_Comm_create(ic, g == 0 ? MPI_GROUP_EMPTY : lg, &nc));
    CHECK(nc == MPI_COMM_NULL);
    /* the whole local group on both sides: the same shape as ic */
    MPI_OK(MPI_Comm_create(ic, lg, &nc));
    int res = -1;
    MPI_OK(MPI_Comm_compare(ic, nc, &res));
    CHECK(res == MPI_CONGRUENT);
    MPI_OK(MPI_Comm_free(&nc));
    MPI_OK(MPI_Group_free(&sub));
    MPI_OK(MPI_Group_free(&lg));
    free(ranks);
}

static void split_type_tests(MPI_Comm ic)
{
    /* the harness runs every rank on one host: one shared-memory intercommunicator of the
     * same shape as ic (MPICH 4.2 crashes here on some layouts: madmpi only) */
    MPI_Comm nc;
    if (is_madmpi()) {
        MPI_OK(MPI_Comm_split_type(ic, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc));
        CHECK(nc != MPI_COMM_NULL);
        int res = -1;
        MPI_OK(MPI_Comm_compare(ic, nc, &res));
        CHECK(res == MPI_CONGRUENT);
        MPI_OK(MPI_Comm_free(&nc));
    }
    MPI_OK(MPI_Comm_split_type(ic, MPI_UNDEFINED, 0, MPI_INFO_NULL, &nc));
    CHECK(nc == MPI_COMM_NULL);
}

static void error_tests(MPI_Comm ic)
{
    MPI_OK(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
    int s[64] = {0}, r[64];
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_Group lg;
    MPI_OK(MPI_Comm_group(ic, &lg));
    /* MPI_Comm_create_group is for intracommunicators only */
    EXPECT_CLASS(MPI_Comm_create_group(ic, lg, 5, &nc), MPI_ERR_COMM);
    CHECK(nc == MPI_COMM_NULL);
    MPI_OK(MPI_Group_free(&lg));
    /* MPI_IN_PLACE is not allowed on intercommunicators (every process passes it, so
     * nobody is left waiting) */
    EXPECT_CLASS(MPI_Reduce_scatter_block(MPI_IN_PLACE, r, 1, MPI_INT, MPI_SUM, ic), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Allreduce(MPI_IN_PLACE, r, 1, MPI_INT, MPI_SUM, ic), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Reduce(MPI_IN_PLACE, r, 1, MPI_INT, MPI_SUM, 0, ic), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_INT, r, 1, MPI_INT, ic), MPI_ERR_BUFFER);
    int *counts = xmalloc(sizeof(int) * (size_t)lsize);
    for (int i = 0; i < lsize; i++)
        counts[i] = 1;
    EXPECT_CLASS(MPI_Reduce_scatter(MPI_IN_PLACE, r, counts, MPI_INT, MPI_SUM, ic), MPI_ERR_BUFFER);
    free(counts);
    /* scans are not defined on intercommunicators */
    EXPECT_CLASS(MPI_Scan(s, r, 1, MPI_INT, MPI_SUM, ic), MPI_ERR_COMM);
    /* a negative color other than MPI_UNDEFINED (MPICH does not check it) */
    if (is_madmpi())
        EXPECT_CLASS(MPI_Comm_split(ic, -5, 0, &nc), MPI_ERR_ARG);
    /* the intercommunicator still works after the errors */
    int x = 1, y = 0;
    MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, ic));
    CHECK(y == rsize);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size < 2) {
        t_done("intercomm");
        return 0;
    }
    interleaved = argc > 1 && strcmp(argv[1], "interleaved") == 0;
    split_a = (t_size - 1) / 2;
    if (split_a < 1)
        split_a = 1;
    g = interleaved ? t_rank % 2 : t_rank >= split_a;
    MPI_Comm local, ic;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g, t_rank, &local));
    MPI_OK(MPI_Comm_size(local, &lsize));
    MPI_OK(MPI_Comm_rank(local, &lrank));
    MPI_OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, world_of(1 - g, 0), 21, &ic));
    MPI_OK(MPI_Comm_remote_size(ic, &rsize));
    CHECK(lsize + rsize == t_size);
    CHECK(world_of(g, lrank) == t_rank);

    reduce_scatter_tests(ic);
    split_tests(ic);
    create_tests(ic);
    split_type_tests(ic);
    error_tests(ic);

    MPI_OK(MPI_Comm_free(&ic));
    MPI_OK(MPI_Comm_free(&local));
    t_done("intercomm");
    return 0;
}
