/* shm.c - stress of the blocking collectives madmpi runs through shared
 * memory on one node (MPI_Barrier, MPI_Bcast, MPI_Reduce, MPI_Allreduce,
 * MPI_Alltoall), checked against sequential references:
 *
 * - thousands of back-to-back barriers and small collectives with checksums
 *   (rotating roots, MPI_IN_PLACE every third time), on MPI_COMM_WORLD;
 * - the same interleaved over several communicators (a split, a duplicate, a
 *   split in reverse rank order), with user point-to-point traffic
 *   (MPI_ANY_SOURCE / MPI_ANY_TAG receives posted across collectives) and an
 *   MPI_Ibarrier in flight across blocking barriers;
 * - sizes around the chunk and cell boundaries up to 1 MiB, derived
 *   datatypes (a strided int on one side only), a non-commutative operation
 *   (composition of affine maps) in rank order;
 * - many communicators made, used and freed (more than the areas a process
 *   keeps, so some stay on point-to-point);
 * - argument errors (root, count, datatype, buffer, communicator, operation)
 *   on MPI_COMM_WORLD once it has its area, each with its class, and the
 *   collectives after them still agreeing.
 *
 * Rank 0 prints "shm-areas N": how many collective segments (named
 * /dev/shm/madmpi-<job>-<n>-c<r>-<id>) it has mapped before freeing its
 * communicators, so the harness can tell the shared-memory path ran (madmpi
 * only; 0 elsewhere).  Argument: iterations of the loops (default 2000).
 */
#include "coll.h"

#include <stdint.h>

static MPI_Datatype strided; /* one int, extent two ints */
static MPI_Datatype affine;  /* two unsigned: x -> a x + b */
static MPI_Op compose;

/* inout = in o inout (apply inout first, then in): not commutative. */
static void compose_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    unsigned *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        unsigned a1 = a[2 * i], b1 = a[2 * i + 1];
        unsigned a2 = b[2 * i], b2 = b[2 * i + 1];
        b[2 * i] = a1 * a2;
        b[2 * i + 1] = a1 * b2 + b1;
    }
}

static void affine_of(int r, int i, unsigned *out)
{
    out[0] = (unsigned)(2 * r + 3 + (i % 5));
    out[1] = (unsigned)(r * 7 + i);
}

/* Collective segments mapped by this process. */
static int coll_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "/dev/shm/madmpi-");
        if (!p)
            continue;
        /* ...-c<digits>-<digits> */
        char *c = strstr(p, "-c");
        while (c) {
            char *q = c + 2;
            int d1 = 0, d2 = 0;
            while (*q >= '0' && *q <= '9') {
                q++;
                d1++;
            }
            if (d1 && *q == '-') {
                q++;
                while (*q >= '0' && *q <= '9') {
                    q++;
                    d2++;
                }
                if (d2 && (*q == ' ' || *q == '\n' || *q == 0)) {
                    n++;
                    break;
                }
            }
            c = strstr(c + 2, "-c");
        }
    }
    fclose(f);
    return n;
}

/* One round of small collectives on comm, checked; returns a checksum. */
static long small_round(MPI_Comm comm, int it, int salt)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    long sum = 0;

    MPI_OK(MPI_Barrier(comm));

    int x = me + it + salt, y = -1;
    if (it % 3 == 0) {
        y = x;
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_INT, MPI_SUM, comm));
    } else {
        MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm));
    }
    int ey = n * (n - 1) / 2 + n * (it + salt);
    CHECKF(y == ey, "allreduce it %d salt %d: %d, expected %d", it, salt, y, ey);
    sum += y;

    int root = (it + salt) % n;
    int b[3];
    for (int i = 0; i < 3; i++)
        b[i] = me == root ? val(root, i + it, salt) : -12345;
    MPI_OK(MPI_Bcast(b, 3, MPI_INT, root, comm));
    for (int i = 0; i < 3; i++)
        CHECKF(b[i] == val(root, i + it, salt), "bcast it %d root %d i %d", it, root, i);
    sum += b[2];

    long r2[2] = {me * 10L + it, -(long)me}, o2[2] = {-1, -1};
    int rroot = (it * 7 + salt) % n;
    if (me == rroot && it % 3 == 1) {
        o2[0] = r2[0];
        o2[1] = r2[1];
        MPI_OK(MPI_Reduce(MPI_IN_PLACE, o2, 2, MPI_LONG, MPI_MAX, rroot, comm));
    } else {
        MPI_OK(MPI_Reduce(r2, o2, 2, MPI_LONG, MPI_MAX, rroot, comm));
    }
    if (me == rroot) {
        CHECKF(o2[0] == (n - 1) * 10L + it && o2[1] == 0, "reduce it %d: %ld %ld", it, o2[0], o2[1]);
    }

    int sa[64], ra[64];
    CHECK(n <= 64);
    for (int j = 0; j < n; j++) {
        sa[j] = me * 1000 + j + it;
        ra[j] = -1;
    }
    if (it % 3 == 2) {
        memcpy(ra, sa, sizeof(int) * (size_t)n);
        MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, ra, 1, MPI_INT, comm));
    } else {
        MPI_OK(MPI_Alltoall(sa, 1, MPI_INT, ra, 1, MPI_INT, comm));
    }
    for (int j = 0; j < n; j++)
        CHECKF(ra[j] == j * 1000 + me + it, "alltoall it %d from %d: %d", it, j, ra[j]);
    return sum;
}

/* A checksum every rank must agree on. */
static void agree(MPI_Comm comm, long sum, const char *what)
{
    long lo = 0, hi = 0;
    MPI_OK(MPI_Allreduce(&sum, &lo, 1, MPI_LONG, MPI_MIN, comm));
    MPI_OK(MPI_Allreduce(&sum, &hi, 1, MPI_LONG, MPI_MAX, comm));
    CHECKF(lo == hi, "%s: checksums differ between ranks (%ld .. %ld)", what, lo, hi);
}

static void barriers(int iters)
{
    /* Back-to-back barriers with a running count that must stay in step. */
    for (int i = 0; i < iters; i++) {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (i % 500 == 0) {
            int v = i, m = -1;
            MPI_OK(MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
            CHECKF(m == i, "barrier %d: a rank is at %d", i, m);
        }
    }
    /* Small allreduces back to back, summed locally and compared. */
    long acc = 0;
    for (int i = 0; i < iters; i++) {
        long v = (long)t_rank * i + 1, s = 0;
        MPI_OK(MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        CHECKF(s == (long)t_size * (t_size - 1) / 2 * i + t_size, "allreduce %d: %ld", i, s);
        acc += s;
    }
    long want = 0;
    for (int i = 0; i < iters; i++)
        want += (long)t_size * (t_size - 1) / 2 * i + t_size;
    CHECK(acc == want);
}

static void interleaved(int iters)
{
    MPI_Comm half, dup, rev;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_rank, &half));
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, t_size - t_rank, &rev));

    /* A receive for anything, posted across the collectives: it must get the
     * user message sent after them, not a byte of theirs. */
    int got[2] = {-1, -1};
    MPI_Request rq, ib;
    MPI_OK(MPI_Irecv(got, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Ibarrier(dup, &ib));

    long s = 0;
    for (int it = 0; it < iters; it++) {
        s += small_round(MPI_COMM_WORLD, it, 0);
        (void)small_round(half, it, 1); /* the halves differ */
        s += small_round(dup, it, 2);
        s += small_round(rev, it, 3);
        if (it == iters / 2)
            MPI_OK(MPI_Wait(&ib, MPI_STATUS_IGNORE));
    }
    int flag = 0;
    MPI_OK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
    CHECKF(!flag, "the user receive matched something during the collectives");
    /* Nobody sends before everyone has looked. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int msg[2] = {t_rank, 4242};
    MPI_OK(MPI_Send(msg, 2, MPI_INT, (t_rank + 1) % t_size, 42, MPI_COMM_WORLD));
    MPI_Status st;
    MPI_OK(MPI_Wait(&rq, &st));
    int from = (t_rank - 1 + t_size) % t_size;
    CHECKF(st.MPI_SOURCE == from && st.MPI_TAG == 42 && got[0] == from && got[1] == 4242,
           "user message: source %d tag %d data %d %d", st.MPI_SOURCE, st.MPI_TAG, got[0], got[1]);
    agree(MPI_COMM_WORLD, s, "interleaved");

    MPI_OK(MPI_Comm_free(&half));
    MPI_OK(MPI_Comm_free(&dup));
    MPI_OK(MPI_Comm_free(&rev));
}

static void large(MPI_Comm comm)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    static const long sizes[] = {0, 1, 7, 4095, 4096, 4097, 8192, 65535, 65536, 65537, 200003, 1L << 20, (3L << 20) + 5};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        long nb = sizes[z];
        /* bcast of bytes, every root */
        unsigned char *buf = xmalloc((size_t)nb);
        for (int root = 0; root < n; root += (n > 3 ? n / 2 : 1)) {
            for (long i = 0; i < nb; i++)
                buf[i] = me == root ? (unsigned char)(i * 13 + root + nb) : 0;
            MPI_OK(MPI_Bcast(buf, (int)nb, MPI_BYTE, root, comm));
            for (long i = 0; i < nb; i++)
                CHECKF(buf[i] == (unsigned char)(i * 13 + root + nb), "bcast %ld root %d byte %ld", nb, root, i);
        }
        free(buf);

        /* allreduce / reduce of doubles holding small integers (exact) */
        long cnt = nb / 8;
        double *s = xmalloc(sizeof(double) * (size_t)cnt);
        double *r = xmalloc(sizeof(double) * (size_t)cnt);
        for (long i = 0; i < cnt; i++) {
            s[i] = (double)((me + 1) * (i % 1000 + 1));
            r[i] = -1;
        }
        MPI_OK(MPI_Allreduce(s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, comm));
        for (long i = 0; i < cnt; i++)
            CHECKF(r[i] == (double)n * (n + 1) / 2 * (double)(i % 1000 + 1), "allreduce %ld i %ld: %g", cnt, i, r[i]);
        for (long i = 0; i < cnt; i++)
            r[i] = s[i];
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, r, (int)cnt, MPI_DOUBLE, MPI_MAX, comm));
        for (long i = 0; i < cnt; i++)
            CHECKF(r[i] == (double)n * (double)(i % 1000 + 1), "allreduce max %ld i %ld", cnt, i);
        int root = (int)(z % (size_t)n);
        for (long i = 0; i < cnt; i++)
            r[i] = -1;
        MPI_OK(MPI_Reduce(s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, root, comm));
        if (me == root)
            for (long i = 0; i < cnt; i++)
                CHECKF(r[i] == (double)n * (n + 1) / 2 * (double)(i % 1000 + 1), "reduce %ld i %ld", cnt, i);
        free(s);
        free(r);

        /* alltoall of nb / n bytes per block (at most 256 KiB) */
        long bb = nb / n;
        if (bb > 262144)
            bb = 262144;
        unsigned char *sa = xmalloc((size_t)(bb * n)), *ra = xmalloc((size_t)(bb * n));
        for (int j = 0; j < n; j++)
            for (long i = 0; i < bb; i++) {
                sa[j * bb + i] = (unsigned char)(me * 31 + j * 7 + i);
                ra[j * bb + i] = 0;
            }
        MPI_OK(MPI_Alltoall(sa, (int)bb, MPI_BYTE, ra, (int)bb, MPI_BYTE, comm));
        for (int j = 0; j < n; j++)
            for (long i = 0; i < bb; i++)
                CHECKF(ra[j * bb + i] == (unsigned char)(j * 31 + me * 7 + i), "alltoall %ld from %d byte %ld", bb, j, i);
        /* the same in place */
        memcpy(ra, sa, (size_t)(bb * n));
        MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ra, (int)bb, MPI_BYTE, comm));
        for (int j = 0; j < n; j++)
            for (long i = 0; i < bb; i++)
                CHECKF(ra[j * bb + i] == (unsigned char)(j * 31 + me * 7 + i), "alltoall in place %ld from %d byte %ld", bb, j, i);
        free(sa);
        free(ra);
    }
}

static void derived(MPI_Comm comm, int count)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    const int FILL = 777;
    int *buf = xmalloc(sizeof(int) * 2 * (size_t)count);
    /* bcast: the root sends contiguous ints, the others receive strided */
    int root = n - 1;
    for (int i = 0; i < 2 * count; i++)
        buf[i] = FILL;
    if (me == root)
        for (int i = 0; i < count; i++)
            buf[i] = val(root, i, 5);
    MPI_OK(MPI_Bcast(buf, count, me == root ? MPI_INT : strided, root, comm));
    if (me != root)
        for (int i = 0; i < count; i++)
            CHECKF(buf[2 * i] == val(root, i, 5) && buf[2 * i + 1] == FILL, "strided bcast i %d", i);

    /* allreduce on strided data, in place */
    if (is_madmpi()) {
        for (int i = 0; i < count; i++) {
            buf[2 * i] = val(me, i, 6);
            buf[2 * i + 1] = FILL;
        }
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, buf, count, strided, MPI_SUM, comm));
        for (int i = 0; i < count; i++) {
            int e = 0;
            for (int r = 0; r < n; r++)
                e += val(r, i, 6);
            CHECKF(buf[2 * i] == e && buf[2 * i + 1] == FILL, "strided allreduce i %d", i);
        }
    }

    /* alltoall: contiguous out, strided in */
    int *sa = xmalloc(sizeof(int) * (size_t)count * (size_t)n);
    int *ra = xmalloc(sizeof(int) * 2 * (size_t)count * (size_t)n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
            sa[j * count + i] = val(me, j * count + i, 7);
    for (int i = 0; i < 2 * count * n; i++)
        ra[i] = FILL;
    MPI_OK(MPI_Alltoall(sa, count, MPI_INT, ra, count, strided, comm));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < count; i++)
            CHECKF(ra[2 * (j * count + i)] == val(j, me * count + i, 7) && ra[2 * (j * count + i) + 1] == FILL,
                   "strided alltoall from %d i %d", j, i);
    free(sa);
    free(ra);
    free(buf);
}

static void noncommutative(MPI_Comm comm, int count)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    unsigned *s = xmalloc(sizeof(unsigned) * 2 * (size_t)count);
    unsigned *r = xmalloc(sizeof(unsigned) * 2 * (size_t)count);
    unsigned *e = xmalloc(sizeof(unsigned) * 2 * (size_t)count);
    for (int i = 0; i < count; i++) {
        affine_of(me, i, s + 2 * i);
        /* reference: c0 o (c1 o (... o cn-1)), folded from the right */
        affine_of(n - 1, i, e + 2 * i);
        for (int q = n - 2; q >= 0; q--) {
            unsigned c[2];
            affine_of(q, i, c);
            int one = 1;
            compose_fn(c, e + 2 * i, &one, NULL);
        }
    }
    MPI_OK(MPI_Allreduce(s, r, count, affine, compose, comm));
    for (int i = 0; i < count; i++)
        CHECKF(r[2 * i] == e[2 * i] && r[2 * i + 1] == e[2 * i + 1], "non-commutative allreduce %d i %d", count, i);
    for (int root = 0; root < n; root += (n > 2 ? 2 : 1)) {
        memset(r, 0, sizeof(unsigned) * 2 * (size_t)count);
        MPI_OK(MPI_Reduce(s, r, count, affine, compose, root, comm));
        if (me == root)
            for (int i = 0; i < count; i++)
                CHECKF(r[2 * i] == e[2 * i] && r[2 * i + 1] == e[2 * i + 1], "non-commutative reduce root %d i %d", root, i);
    }
    free(s);
    free(r);
    free(e);
}

static void bad_arguments(MPI_Comm comm)
{
    /* Argument errors of the blocking collectives on a communicator that has
     * an area (the short paths check them too): the class each names, and no
     * step consumed (every rank makes the same error, then the next
     * collectives still agree). */
    int n, b[4] = {0, 0, 0, 0};
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    for (int rep = 0; rep < 3; rep++) {
        EXPECT_CLASS(MPI_Bcast(b, 1, MPI_INT, n, comm), MPI_ERR_ROOT);
        EXPECT_CLASS(MPI_Bcast(b, 1, MPI_INT, -1, comm), MPI_ERR_ROOT);
        EXPECT_CLASS(MPI_Bcast(b, 1, MPI_INT, MPI_PROC_NULL, comm), MPI_ERR_ROOT);
        EXPECT_CLASS(MPI_Bcast(b, 1, MPI_INT, MPI_ROOT, comm), MPI_ERR_ROOT);
        EXPECT_CLASS(MPI_Bcast(b, -1, MPI_INT, 0, comm), MPI_ERR_COUNT);
        EXPECT_CLASS(MPI_Bcast(b, 1, MPI_DATATYPE_NULL, 0, comm), MPI_ERR_TYPE);
        EXPECT_CLASS(MPI_Bcast(NULL, 1, MPI_INT, 0, comm), MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Bcast(b, 1, MPI_INT, 0, MPI_COMM_NULL), MPI_ERR_COMM);
        EXPECT_CLASS(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);
        EXPECT_CLASS(MPI_Reduce(b, b + 1, 1, MPI_INT, MPI_SUM, n, comm), MPI_ERR_ROOT);
        EXPECT_CLASS(MPI_Allreduce(b, b + 1, 1, MPI_INT, MPI_OP_NULL, comm), MPI_ERR_OP);
        /* Then the same collectives, right. */
        int root = rep % n;
        for (int i = 0; i < 4; i++)
            b[i] = t_rank == root ? val(root, i, rep) : -1;
        MPI_OK(MPI_Bcast(b, 4, MPI_INT, root, comm));
        for (int i = 0; i < 4; i++)
            CHECKF(b[i] == val(root, i, rep), "bcast after errors: b[%d] = %d", i, b[i]);
        MPI_OK(MPI_Barrier(comm));
        int one = 1, sum = 0;
        MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
        CHECKF(sum == n, "allreduce after errors: %d", sum);
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    MPI_OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL));
}

static void many_comms(void)
{
    /* More live communicators than areas a process keeps, each used enough
     * to want one; then freed and made again. */
    enum { K = 70 };
    MPI_Comm c[K];
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < K; k++)
            MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c[k]));
        for (int it = 0; it < 4; it++)
            for (int k = 0; k < K; k++) {
                int v = k + it, s = 0;
                MPI_OK(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c[k]));
                CHECKF(s == t_size * (k + it), "comm %d it %d: %d", k, it, s);
            }
        for (int k = 0; k < K; k++)
            MPI_OK(MPI_Comm_free(&c[k]));
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &strided));
    MPI_OK(MPI_Type_commit(&strided));
    MPI_OK(MPI_Type_contiguous(2, MPI_UNSIGNED, &affine));
    MPI_OK(MPI_Type_commit(&affine));
    MPI_OK(MPI_Op_create(compose_fn, 0, &compose));

    barriers(iters);
    bad_arguments(MPI_COMM_WORLD);
    interleaved(iters / 4);

    MPI_Comm half;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, -t_rank, &half));
    for (int rep = 0; rep < 3; rep++) {
        large(MPI_COMM_WORLD);
        large(half);
    }
    for (int rep = 0; rep < 3; rep++) {
        derived(MPI_COMM_WORLD, 1);
        derived(MPI_COMM_WORLD, 20000);
        derived(MPI_COMM_WORLD, 200000);
        derived(half, 3000);
        noncommutative(MPI_COMM_WORLD, 3);
        noncommutative(MPI_COMM_WORLD, 9000);
        noncommutative(MPI_COMM_WORLD, 150001);
        noncommutative(half, 5000);
    }
    int maps = coll_maps();
    MPI_OK(MPI_Comm_free(&half));
    many_comms();

    if (t_rank == 0) {
        printf("shm-areas %d\n", is_madmpi() ? maps : 0);
        fflush(stdout);
    }
    MPI_OK(MPI_Op_free(&compose));
    MPI_OK(MPI_Type_free(&affine));
    MPI_OK(MPI_Type_free(&strided));
    t_done("shm");
    return 0;
}
