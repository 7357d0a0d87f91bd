/* basic.c - every blocking collective against a sequential reference, on
 * MPI_COMM_WORLD, on sub-communicators from MPI_Comm_split (uneven sizes,
 * reversed rank order) and on a duplicate, with several counts (the large
 * ones switch algorithms), MPI_IN_PLACE wherever the standard allows it, and
 * a non-contiguous derived datatype ("strided int": an int with extent 8) on
 * either side.  Run with MADMPI_COLL_<NAME>=<algorithm> to force algorithms.
 */
#include "coll.h"

static MPI_Datatype strided; /* one int, extent two ints */
/* Predefined operations on derived datatypes (madmpi; MPICH and Open MPI
 * reject them with MPI_ERR_OP, so the reference runs skip those checks). */
static int derived_ops;
static const int FILL = 77777;

static int nroots(int n, int *roots)
{
    int k = 0;
    roots[k++] = 0;
    if (n > 1)
        roots[k++] = n - 1;
    if (n > 2)
        roots[k++] = n / 2;
    return k;
}

static void test_bcast(MPI_Comm comm, int n, int me, int count)
{
    int roots[3], nr = nroots(n, roots);
    int *buf = xmalloc(sizeof(int) * 2 * (size_t)count);
    for (int k = 0; k < nr; k++) {
        int root = roots[k];
        for (int i = 0; i < count; i++)
            buf[i] = me == root ? val(root, i, 1) : -1;
        MPI_OK(MPI_Bcast(buf, count, MPI_INT, root, comm));
        for (int i = 0; i < count; i++)
            CHECKF(buf[i] == val(root, i, 1), "bcast root %d count %d i %d: %d", root, count, i, buf[i]);
        /* derived type: data at even positions, gaps untouched */
        for (int i = 0; i < count; i++) {
            buf[2 * i] = me == root ? val(root, i, 11) : -1;
            buf[2 * i + 1] = FILL;
        }
        MPI_OK(MPI_Bcast(buf, count, strided, root, comm));
        for (int i = 0; i < count; i++)
            CHECKF(buf[2 * i] == val(root, i, 11) && buf[2 * i + 1] == FILL,
                   "strided bcast root %d count %d i %d", root, count, i);
    }
    free(buf);
}

static void test_reduce(MPI_Comm comm, int n, int me, int count)
{
    int roots[3], nr = nroots(n, roots);
    int *s = xmalloc(sizeof(int) * 2 * (size_t)count);
    int *r = xmalloc(sizeof(int) * 2 * (size_t)count);
    for (int k = 0; k < nr; k++) {
        int root = roots[k];
        for (int i = 0; i < count; i++)
            s[i] = val(me, i, 2);
        MPI_OK(MPI_Reduce(s, me == root ? r : NULL, count, MPI_INT, MPI_SUM, root, comm));
        if (me == root)
            for (int i = 0; i < count; i++) {
                int e = 0;
                for (int q = 0; q < n; q++)
                    e += val(q, i, 2);
                CHECKF(r[i] == e, "reduce root %d count %d i %d: %d != %d", root, count, i, r[i], e);
            }
        /* MAX, in place at the root */
        for (int i = 0; i < count; i++)
            r[i] = val(me, i, 3);
        /* (MPICH 4.0.2 crashes on a large in-place reduce at a root other than
         * 0: the reference runs copy instead.) */
        if (me == root && (derived_ops || root == 0 || count < 1000)) {
            MPI_OK(MPI_Reduce(MPI_IN_PLACE, r, count, MPI_INT, MPI_MAX, root, comm));
        } else if (me == root) {
            memcpy(s, r, sizeof(int) * (size_t)count);
            MPI_OK(MPI_Reduce(s, r, count, MPI_INT, MPI_MAX, root, comm));
        } else {
            MPI_OK(MPI_Reduce(r, s, count, MPI_INT, MPI_MAX, root, comm));
        }
        if (me == root)
            for (int i = 0; i < count; i++) {
                int e = val(0, i, 3);
                for (int q = 1; q < n; q++)
                    e = val(q, i, 3) > e ? val(q, i, 3) : e;
                CHECKF(r[i] == e, "reduce max in place root %d i %d", root, i);
            }
        /* derived type on both sides */
        if (!derived_ops)
            continue;
        for (int i = 0; i < count; i++) {
            s[2 * i] = val(me, i, 4);
            s[2 * i + 1] = -5;
            r[2 * i] = -1;
            r[2 * i + 1] = FILL;
        }
        MPI_OK(MPI_Reduce(s, r, count, strided, MPI_SUM, root, comm));
        if (me == root)
            for (int i = 0; i < count; i++) {
                int e = 0;
                for (int q = 0; q < n; q++)
                    e += val(q, i, 4);
                CHECKF(r[2 * i] == e && r[2 * i + 1] == FILL, "strided reduce i %d", i);
            }
    }
    free(s);
    free(r);
}

static void test_allreduce(MPI_Comm comm, int n, int me, int count)
{
    int *s = xmalloc(sizeof(int) * 2 * (size_t)count);
    int *r = xmalloc(sizeof(int) * 2 * (size_t)count);
    double *ds = xmalloc(sizeof(double) * (size_t)count);
    double *dr = xmalloc(sizeof(double) * (size_t)count);
    for (int i = 0; i < count; i++) {
        s[i] = val(me, i, 5);
        ds[i] = val(me, i, 6) * 0.5;
    }
    MPI_OK(MPI_Allreduce(s, r, count, MPI_INT, MPI_SUM, comm));
    MPI_OK(MPI_Allreduce(ds, dr, count, MPI_DOUBLE, MPI_MIN, comm));
    for (int i = 0; i < count; i++) {
        int e = 0;
        double m = val(0, i, 6) * 0.5;
        for (int q = 0; q < n; q++) {
            e += val(q, i, 5);
            if (val(q, i, 6) * 0.5 < m)
                m = val(q, i, 6) * 0.5;
        }
        CHECKF(r[i] == e, "allreduce count %d i %d: %d != %d", count, i, r[i], e);
        CHECKF(dr[i] == m, "allreduce min double i %d", i);
    }
    /* in place */
    for (int i = 0; i < count; i++)
        r[i] = val(me, i, 7);
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, r, count, MPI_INT, MPI_BXOR, comm));
    for (int i = 0; i < count; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e ^= val(q, i, 7);
        CHECKF(r[i] == e, "allreduce in place i %d", i);
    }
    /* derived type, in place */
    for (int i = 0; i < count && derived_ops; i++) {
        r[2 * i] = val(me, i, 8);
        r[2 * i + 1] = FILL;
    }
    if (derived_ops)
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, r, count, strided, MPI_SUM, comm));
    for (int i = 0; i < count && derived_ops; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e += val(q, i, 8);
        CHECKF(r[2 * i] == e && r[2 * i + 1] == FILL, "strided allreduce i %d", i);
    }
    free(s);
    free(r);
    free(ds);
    free(dr);
}

static void test_gather_scatter(MPI_Comm comm, int n, int me, int count)
{
    int roots[3], nr = nroots(n, roots);
    size_t tot = (size_t)count * (size_t)n;
    int *s = xmalloc(sizeof(int) * (size_t)count);
    int *big = xmalloc(sizeof(int) * 2 * tot);
    int *cnts = xmalloc(sizeof(int) * (size_t)n);
    int *displs = xmalloc(sizeof(int) * (size_t)n);
    for (int k = 0; k < nr; k++) {
        int root = roots[k];
        /* gather */
        for (int i = 0; i < count; i++)
            s[i] = val(me, i, 9);
        for (size_t i = 0; i < tot; i++)
            big[i] = -1;
        MPI_OK(MPI_Gather(s, count, MPI_INT, big, count, MPI_INT, root, comm));
        if (me == root)
            for (int q = 0; q < n; q++)
                for (int i = 0; i < count; i++)
                    CHECKF(big[q * count + i] == val(q, i, 9), "gather root %d q %d i %d", root, q, i);
        /* gather in place, strided at the root */
        for (size_t i = 0; i < 2 * tot; i++)
            big[i] = FILL;
        if (me == root) {
            for (int i = 0; i < count; i++)
                big[2 * (me * count + i)] = val(me, i, 10);
            MPI_OK(MPI_Gather(MPI_IN_PLACE, count, MPI_INT, big, count, strided, root, comm));
            for (int q = 0; q < n; q++)
                for (int i = 0; i < count; i++)
                    CHECKF(big[2 * (q * count + i)] == val(q, i, 10) && big[2 * (q * count + i) + 1] == FILL,
                           "gather in place strided q %d i %d", q, i);
        } else {
            for (int i = 0; i < count; i++)
                s[i] = val(me, i, 10);
            MPI_OK(MPI_Gather(s, count, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root, comm));
        }
        /* gatherv: count + q elements from q, blocks in reverse order */
        int at = 0;
        for (int q = n - 1; q >= 0; q--) {
            cnts[q] = count + q;
            displs[q] = at;
            at += cnts[q] + 1;
        }
        int *gv = xmalloc(sizeof(int) * (size_t)at);
        int *sv = xmalloc(sizeof(int) * (size_t)(count + me));
        for (int i = 0; i < count + me; i++)
            sv[i] = val(me, i, 12);
        for (int i = 0; i < at; i++)
            gv[i] = FILL;
        MPI_OK(MPI_Gatherv(sv, count + me, MPI_INT, gv, cnts, displs, MPI_INT, root, comm));
        if (me == root)
            for (int q = 0; q < n; q++) {
                for (int i = 0; i < cnts[q]; i++)
                    CHECKF(gv[displs[q] + i] == val(q, i, 12), "gatherv q %d i %d", q, i);
                CHECK(gv[displs[q] + cnts[q]] == FILL);
            }
        /* scatter */
        for (int q = 0; q < n; q++)
            for (int i = 0; i < count; i++)
                big[q * count + i] = val(q, i, 13);
        for (int i = 0; i < count; i++)
            s[i] = -1;
        MPI_OK(MPI_Scatter(big, count, MPI_INT, s, count, MPI_INT, root, comm));
        for (int i = 0; i < count; i++)
            CHECKF(s[i] == val(me, i, 13), "scatter root %d i %d: %d", root, i, s[i]);
        /* scatter from a strided root buffer, in place at the root */
        for (int q = 0; q < n; q++)
            for (int i = 0; i < count; i++) {
                big[2 * (q * count + i)] = val(q, i, 14);
                big[2 * (q * count + i) + 1] = FILL;
            }
        for (int i = 0; i < count; i++)
            s[i] = -1;
        if (me == root) {
            MPI_OK(MPI_Scatter(big, count, strided, MPI_IN_PLACE, count, MPI_INT, root, comm));
            for (int i = 0; i < count; i++)
                CHECK(big[2 * (me * count + i)] == val(me, i, 14));
        } else {
            MPI_OK(MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, s, count, MPI_INT, root, comm));
            for (int i = 0; i < count; i++)
                CHECKF(s[i] == val(me, i, 14), "scatter strided root %d i %d", root, i);
        }
        /* scatterv with the gatherv layout */
        for (int q = 0; q < n; q++)
            for (int i = 0; i < cnts[q]; i++)
                gv[displs[q] + i] = val(q, i, 15);
        for (int i = 0; i < count + me; i++)
            sv[i] = -1;
        MPI_OK(MPI_Scatterv(gv, cnts, displs, MPI_INT, sv, count + me, MPI_INT, root, comm));
        for (int i = 0; i < count + me; i++)
            CHECKF(sv[i] == val(me, i, 15), "scatterv i %d", i);
        free(gv);
        free(sv);
    }
    free(s);
    free(big);
    free(cnts);
    free(displs);
}

static void test_allgather(MPI_Comm comm, int n, int me, int count)
{
    size_t tot = (size_t)count * (size_t)n;
    int *s = xmalloc(sizeof(int) * (size_t)count);
    int *r = xmalloc(sizeof(int) * 2 * tot);
    for (int i = 0; i < count; i++)
        s[i] = val(me, i, 16);
    MPI_OK(MPI_Allgather(s, count, MPI_INT, r, count, MPI_INT, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++)
            CHECKF(r[q * count + i] == val(q, i, 16), "allgather count %d q %d i %d", count, q, i);
    /* in place, strided */
    for (size_t i = 0; i < 2 * tot; i++)
        r[i] = FILL;
    for (int i = 0; i < count; i++)
        r[2 * (me * count + i)] = val(me, i, 17);
    MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, count, strided, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++)
            CHECKF(r[2 * (q * count + i)] == val(q, i, 17) && r[2 * (q * count + i) + 1] == FILL,
                   "allgather in place strided q %d i %d", q, i);
    /* allgatherv: count + 2q from q, reverse layout, in place */
    int *cnts = xmalloc(sizeof(int) * (size_t)n), *displs = xmalloc(sizeof(int) * (size_t)n);
    int at = 0;
    for (int q = n - 1; q >= 0; q--) {
        cnts[q] = count + 2 * q;
        displs[q] = at;
        at += cnts[q];
    }
    int *v = xmalloc(sizeof(int) * (size_t)at);
    int *sv = xmalloc(sizeof(int) * (size_t)(count + 2 * me));
    for (int i = 0; i < count + 2 * me; i++)
        sv[i] = val(me, i, 18);
    MPI_OK(MPI_Allgatherv(sv, count + 2 * me, MPI_INT, v, cnts, displs, MPI_INT, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < cnts[q]; i++)
            CHECKF(v[displs[q] + i] == val(q, i, 18), "allgatherv q %d i %d", q, i);
    for (int i = 0; i < at; i++)
        v[i] = -1;
    for (int i = 0; i < cnts[me]; i++)
        v[displs[me] + i] = val(me, i, 19);
    MPI_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, cnts, displs, MPI_INT, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < cnts[q]; i++)
            CHECKF(v[displs[q] + i] == val(q, i, 19), "allgatherv in place q %d i %d", q, i);
    free(s);
    free(r);
    free(cnts);
    free(displs);
    free(v);
    free(sv);
}

static void test_alltoall(MPI_Comm comm, int n, int me, int count)
{
    size_t tot = (size_t)count * (size_t)n;
    int *s = xmalloc(sizeof(int) * 2 * tot);
    int *r = xmalloc(sizeof(int) * 2 * tot);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++)
            s[q * count + i] = val(me * n + q, i, 20);
    MPI_OK(MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++)
            CHECKF(r[q * count + i] == val(q * n + me, i, 20), "alltoall count %d q %d i %d", count, q, i);
    /* in place, strided */
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++) {
            r[2 * (q * count + i)] = val(me * n + q, i, 21);
            r[2 * (q * count + i) + 1] = FILL;
        }
    MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, count, strided, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < count; i++)
            CHECKF(r[2 * (q * count + i)] == val(q * n + me, i, 21) && r[2 * (q * count + i) + 1] == FILL,
                   "alltoall in place q %d i %d", q, i);
    /* alltoallv: (me + q) % 3 + count / 2 elements between me and q */
    int *sc = xmalloc(sizeof(int) * (size_t)n), *sd = xmalloc(sizeof(int) * (size_t)n);
    int *rc = xmalloc(sizeof(int) * (size_t)n), *rd = xmalloc(sizeof(int) * (size_t)n);
    int sat = 0, rat = 0;
    for (int q = 0; q < n; q++) {
        sc[q] = rc[q] = (me + q) % 3 + count / 2;
        sd[q] = sat;
        sat += sc[q];
    }
    for (int q = n - 1; q >= 0; q--) {
        rd[q] = rat;
        rat += rc[q] + 1;
    }
    int *sv = xmalloc(sizeof(int) * (size_t)sat), *rv = xmalloc(sizeof(int) * (size_t)rat);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < sc[q]; i++)
            sv[sd[q] + i] = val(me * n + q, i, 22);
    for (int i = 0; i < rat; i++)
        rv[i] = FILL;
    MPI_OK(MPI_Alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, comm));
    for (int q = 0; q < n; q++) {
        for (int i = 0; i < rc[q]; i++)
            CHECKF(rv[rd[q] + i] == val(q * n + me, i, 22), "alltoallv q %d i %d", q, i);
        CHECK(rv[rd[q] + rc[q]] == FILL);
    }
    /* alltoallv in place */
    for (int q = 0; q < n; q++)
        for (int i = 0; i < rc[q]; i++)
            rv[rd[q] + i] = val(me * n + q, i, 23);
    MPI_OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rv, rc, rd, MPI_INT, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < rc[q]; i++)
            CHECKF(rv[rd[q] + i] == val(q * n + me, i, 23), "alltoallv in place q %d i %d", q, i);
    /* alltoallw: contiguous ints out, strided ints in (byte displacements) */
    MPI_Datatype *st = xmalloc(sizeof(MPI_Datatype) * (size_t)n), *rt = xmalloc(sizeof(MPI_Datatype) * (size_t)n);
    int *sdb = xmalloc(sizeof(int) * (size_t)n), *rdb = xmalloc(sizeof(int) * (size_t)n);
    for (int q = 0; q < n; q++) {
        st[q] = MPI_INT;
        rt[q] = strided;
        sdb[q] = sd[q] * (int)sizeof(int);
        rdb[q] = 2 * rd[q] * (int)sizeof(int);
    }
    int *rw = xmalloc(sizeof(int) * 2 * (size_t)rat);
    for (int i = 0; i < 2 * rat; i++)
        rw[i] = FILL;
    for (int q = 0; q < n; q++)
        for (int i = 0; i < sc[q]; i++)
            sv[sd[q] + i] = val(me * n + q, i, 24);
    MPI_OK(MPI_Alltoallw(sv, sc, sdb, st, rw, rc, rdb, rt, comm));
    for (int q = 0; q < n; q++)
        for (int i = 0; i < rc[q]; i++)
            CHECKF(rw[2 * (rd[q] + i)] == val(q * n + me, i, 24) && rw[2 * (rd[q] + i) + 1] == FILL,
                   "alltoallw q %d i %d", q, i);
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(sv);
    free(rv);
    free(st);
    free(rt);
    free(sdb);
    free(rdb);
    free(rw);
}

static void test_reduce_scatter_scan(MPI_Comm comm, int n, int me, int count)
{
    size_t tot = (size_t)count * (size_t)n;
    int *s = xmalloc(sizeof(int) * (tot + 1));
    int *r = xmalloc(sizeof(int) * (tot + 1));
    for (size_t i = 0; i < tot; i++)
        s[i] = val(me, (int)i, 25);
    MPI_OK(MPI_Reduce_scatter_block(s, r, count, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e += val(q, me * count + i, 25);
        CHECKF(r[i] == e, "reduce_scatter_block count %d i %d: %d != %d", count, i, r[i], e);
    }
    /* in place */
    for (size_t i = 0; i < tot; i++)
        r[i] = val(me, (int)i, 26);
    MPI_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, r, count, MPI_INT, MPI_MAX, comm));
    for (int i = 0; i < count; i++) {
        int e = val(0, me * count + i, 26);
        for (int q = 1; q < n; q++)
            e = val(q, me * count + i, 26) > e ? val(q, me * count + i, 26) : e;
        CHECKF(r[i] == e, "reduce_scatter_block in place i %d", i);
    }
    /* reduce_scatter with counts (q % 2) * count + q */
    int *rc = xmalloc(sizeof(int) * (size_t)n);
    int total = 0, mine = 0;
    for (int q = 0; q < n; q++) {
        rc[q] = (q % 2) * count + q;
        if (q < me)
            mine += rc[q];
        total += rc[q];
    }
    int *sv = xmalloc(sizeof(int) * (size_t)(total + 1)), *rv = xmalloc(sizeof(int) * (size_t)(total + 1));
    for (int i = 0; i < total; i++)
        sv[i] = val(me, i, 27);
    MPI_OK(MPI_Reduce_scatter(sv, rv, rc, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < rc[me]; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e += val(q, mine + i, 27);
        CHECKF(rv[i] == e, "reduce_scatter i %d", i);
    }
    for (int i = 0; i < total; i++)
        rv[i] = val(me, i, 28);
    MPI_OK(MPI_Reduce_scatter(MPI_IN_PLACE, rv, rc, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < rc[me]; i++) {
        int e = 0;
        for (int q = 0; q < n; q++)
            e += val(q, mine + i, 28);
        CHECKF(rv[i] == e, "reduce_scatter in place i %d", i);
    }
    /* scan and exscan */
    for (int i = 0; i < count; i++)
        s[i] = val(me, i, 29);
    MPI_OK(MPI_Scan(s, r, count, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < count; i++) {
        int e = 0;
        for (int q = 0; q <= me; q++)
            e += val(q, i, 29);
        CHECKF(r[i] == e, "scan i %d", i);
    }
    for (int i = 0; i < count; i++)
        r[i] = me == 0 ? FILL : -1;
    MPI_OK(MPI_Exscan(s, r, count, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < count && me > 0; i++) {
        int e = 0;
        for (int q = 0; q < me; q++)
            e += val(q, i, 29);
        CHECKF(r[i] == e, "exscan i %d", i);
    }
    for (int i = 0; i < count; i++)
        r[i] = val(me, i, 30);
    MPI_OK(MPI_Scan(MPI_IN_PLACE, r, count, MPI_INT, MPI_MAX, comm));
    for (int i = 0; i < count; i++) {
        int e = val(0, i, 30);
        for (int q = 1; q <= me; q++)
            e = val(q, i, 30) > e ? val(q, i, 30) : e;
        CHECKF(r[i] == e, "scan in place i %d", i);
    }
    for (int i = 0; i < count; i++)
        r[i] = val(me, i, 31);
    MPI_OK(MPI_Exscan(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < count && me > 0; i++) {
        int e = 0;
        for (int q = 0; q < me; q++)
            e += val(q, i, 31);
        CHECKF(r[i] == e, "exscan in place i %d", i);
    }
    free(s);
    free(r);
    free(rc);
    free(sv);
    free(rv);
}

static void run_all(MPI_Comm comm, int count)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    MPI_OK(MPI_Barrier(comm));
    test_bcast(comm, n, me, count);
    test_reduce(comm, n, me, count);
    test_allreduce(comm, n, me, count);
    test_gather_scatter(comm, n, me, count);
    test_allgather(comm, n, me, count);
    test_alltoall(comm, n, me, count);
    test_reduce_scatter_scan(comm, n, me, count);
    MPI_OK(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    derived_ops = is_madmpi();
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &strided));
    MPI_OK(MPI_Type_commit(&strided));
    static const int counts[] = {0, 1, 17, 1500};
    int nc = (int)(sizeof counts / sizeof counts[0]);
    if (argc > 1)
        nc = atoi(argv[1]);

    MPI_Comm half, dup;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_size - t_rank, &half));
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    for (int k = 0; k < nc; k++) {
        run_all(MPI_COMM_WORLD, counts[k]);
        run_all(half, counts[k]);
    }
    run_all(dup, 5);
    run_all(MPI_COMM_SELF, 3);
    MPI_OK(MPI_Comm_free(&half));
    MPI_OK(MPI_Comm_free(&dup));
    MPI_OK(MPI_Type_free(&strided));
    t_done("basic");
    return 0;
}
