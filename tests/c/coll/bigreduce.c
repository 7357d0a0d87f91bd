/* bigreduce.c - large MPI_Allreduce and MPI_Reduce (blocking, and
 * MPI_Iallreduce for comparison) around the sizes where madmpi's
 * shared-memory path changes algorithm (64 KiB: cross-memory attach; 64 KiB
 * pieces within a member's block), checked against sequential references:
 *
 * - counts just below, at and above the thresholds, odd counts that do not
 *   divide among the ranks, up to 4 MiB + 56 bytes;
 * - doubles holding small integers (MPI_SUM, exact), ints (MPI_MAX), and a
 *   non-commutative user operation (composition of affine maps) in rank
 *   order;
 * - separate buffers and MPI_IN_PLACE; MPI_Reduce to every root (in place
 *   at the root), whose two-process form gives the root the larger share;
 * - a derived datatype with gaps (every other double), and a guard word after
 *   the odd int counts (nothing written past the vector or into the gaps);
 * - MPI_COMM_WORLD and a communicator of the ranks in reverse order;
 * - the same buffers reused call after call, each call with new values (so a
 *   result left from the previous call is noticed).
 *
 * Argument: repetitions (default 2).
 */
#include "coll.h"

static MPI_Datatype affine; /* two unsigned: x -> a x + b */
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

static void affine_of(int r, long i, int salt, unsigned *out)
{
    out[0] = (unsigned)(2 * r + 3 + (i + salt) % 5);
    out[1] = (unsigned)(r * 7 + i + salt);
}

static double dval(int r, long i, int salt)
{
    return (double)((r + 1) * ((i + salt) % 1000 + 1));
}

static int ival(int r, long i, int salt)
{
    return (int)((r * 131 + i * 7 + salt * 31) % 1000) - 300;
}

static void doubles(MPI_Comm comm, long cnt, int salt, double *s, double *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    double tri = (double)n * (n + 1) / 2;
    for (long i = 0; i < cnt; i++) {
        s[i] = dval(me, i, salt);
        r[i] = -1;
    }
    MPI_OK(MPI_Allreduce(s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, comm));
    for (long i = 0; i < cnt; i++)
        CHECKF(r[i] == tri * (double)((i + salt) % 1000 + 1), "allreduce %ld i %ld: %g", cnt, i, r[i]);
    /* in place, with the next values */
    for (long i = 0; i < cnt; i++)
        r[i] = dval(me, i, salt + 1);
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, r, (int)cnt, MPI_DOUBLE, MPI_SUM, comm));
    for (long i = 0; i < cnt; i++)
        CHECKF(r[i] == tri * (double)((i + salt + 1) % 1000 + 1), "in-place allreduce %ld i %ld: %g", cnt, i, r[i]);
    /* non-blocking: the same answer */
    for (long i = 0; i < cnt; i++)
        r[i] = -1;
    MPI_Request q;
    MPI_OK(MPI_Iallreduce(s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, comm, &q));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (long i = 0; i < cnt; i++)
        CHECKF(r[i] == tri * (double)((i + salt) % 1000 + 1), "iallreduce %ld i %ld: %g", cnt, i, r[i]);
    /* reduce to every root; in place at the root every other time */
    for (int root = 0; root < n; root++) {
        int inplace = me == root && (root + salt) % 2;
        for (long i = 0; i < cnt; i++)
            r[i] = inplace ? dval(me, i, salt + root) : -1;
        if (!inplace)
            for (long i = 0; i < cnt; i++)
                s[i] = dval(me, i, salt + root);
        MPI_OK(MPI_Reduce(inplace ? MPI_IN_PLACE : s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, root, comm));
        if (me == root)
            for (long i = 0; i < cnt; i++)
                CHECKF(r[i] == tri * (double)((i + salt + root) % 1000 + 1), "reduce %ld root %d i %ld: %g", cnt, root, i, r[i]);
        else
            for (long i = 0; i < cnt; i++)
                CHECKF(r[i] == -1, "reduce %ld root %d: non-root buffer changed at %ld", cnt, root, i);
    }
}

static int imax(int n, long i, int salt)
{
    int e = ival(0, i, salt);
    for (int q = 1; q < n; q++)
        if (ival(q, i, salt) > e)
            e = ival(q, i, salt);
    return e;
}

/* Odd counts (they divide neither among the ranks nor into the pieces and
 * their claims), with a guard word after the vector that must stay as it
 * was: allreduce, in-place iallreduce, and reduce to every root (in place
 * at the root every other root). */
static void ints(MPI_Comm comm, long cnt, int salt, int *s, int *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    const int guard = 0x5a5a5a5a;
    for (long i = 0; i < cnt; i++) {
        s[i] = ival(me, i, salt);
        r[i] = 12345;
    }
    r[cnt] = guard;
    MPI_OK(MPI_Allreduce(s, r, (int)cnt, MPI_INT, MPI_MAX, comm));
    for (long i = 0; i < cnt; i++)
        CHECKF(r[i] == imax(n, i, salt), "int max %ld i %ld: %d, expected %d", cnt, i, r[i], imax(n, i, salt));
    CHECKF(r[cnt] == guard, "int max %ld: wrote past the end", cnt);
    for (long i = 0; i < cnt; i++)
        r[i] = s[i];
    MPI_Request q;
    MPI_OK(MPI_Iallreduce(MPI_IN_PLACE, r, (int)cnt, MPI_INT, MPI_MAX, comm, &q));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (long i = 0; i < cnt; i++)
        CHECKF(r[i] == imax(n, i, salt), "in-place iallreduce int max %ld i %ld: %d", cnt, i, r[i]);
    CHECKF(r[cnt] == guard, "in-place iallreduce int max %ld: wrote past the end", cnt);
    for (int root = 0; root < n; root++) {
        int inplace = me == root && (root + salt) % 2;
        for (long i = 0; i < cnt; i++)
            r[i] = inplace ? s[i] : 12345;
        MPI_OK(MPI_Reduce(inplace ? MPI_IN_PLACE : s, r, (int)cnt, MPI_INT, MPI_MAX, root, comm));
        for (long i = 0; i < cnt; i++)
            CHECKF(r[i] == (me == root ? imax(n, i, salt) : 12345), "int max reduce %ld root %d (in place %d) i %ld: %d", cnt, root, inplace, i, r[i]);
        CHECKF(r[cnt] == guard, "int max reduce %ld root %d: wrote past the end", cnt, root);
    }
}

/* A derived datatype (one double, extent two: every other double), MPI_SUM,
 * reduce to every root and allreduce: the gaps must stay as they were. */
static void strided(MPI_Comm comm, long cnt, int salt, double *s, double *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    MPI_Datatype one, every_other;
    MPI_OK(MPI_Type_contiguous(1, MPI_DOUBLE, &one));
    MPI_OK(MPI_Type_create_resized(one, 0, 2 * (MPI_Aint)sizeof(double), &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    double tri = (double)n * (n + 1) / 2;
    for (int root = -1; root < n; root++) {
        for (long i = 0; i < cnt; i++) {
            s[2 * i] = dval(me, i, salt + root);
            s[2 * i + 1] = -7;
            r[2 * i] = -1;
            r[2 * i + 1] = -3;
        }
        if (root < 0)
            MPI_OK(MPI_Allreduce(s, r, (int)cnt, every_other, MPI_SUM, comm));
        else
            MPI_OK(MPI_Reduce(s, r, (int)cnt, every_other, MPI_SUM, root, comm));
        int gets = root < 0 || me == root;
        for (long i = 0; i < cnt; i++) {
            double e = gets ? tri * (double)((i + salt + root) % 1000 + 1) : -1;
            CHECKF(r[2 * i] == e, "strided reduce %ld root %d i %ld: %g", cnt, root, i, r[2 * i]);
            CHECKF(r[2 * i + 1] == -3, "strided reduce %ld root %d: gap %ld written", cnt, root, i);
        }
    }
    MPI_OK(MPI_Type_free(&every_other));
    MPI_OK(MPI_Type_free(&one));
}

/* The expected element i: c0 o (c1 o (... o cn-1)), folded from the right. */
static void composed(int n, long i, int salt, unsigned *e)
{
    unsigned c[2];
    affine_of(n - 1, i, salt, e);
    for (int q = n - 2; q >= 0; q--) {
        int one = 1;
        affine_of(q, i, salt, c);
        compose_fn(c, e, &one, NULL);
    }
}

static void noncommutative(MPI_Comm comm, long cnt, int salt, unsigned *s, unsigned *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    for (long i = 0; i < cnt; i++)
        affine_of(me, i, salt, s + 2 * i);
    for (int inplace = 0; inplace < 2; inplace++) {
        if (inplace)
            memcpy(r, s, sizeof(unsigned) * 2 * (size_t)cnt);
        else
            memset(r, 0, sizeof(unsigned) * 2 * (size_t)cnt);
        MPI_OK(MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, (int)cnt, affine, compose, comm));
        for (long i = 0; i < cnt; i++) {
            unsigned e[2];
            composed(n, i, salt, e);
            CHECKF(r[2 * i] == e[0] && r[2 * i + 1] == e[1], "non-commutative allreduce %ld (in place %d) i %ld", cnt, inplace, i);
        }
    }
    for (int root = 0; root < n; root++) {
        memset(r, 0, sizeof(unsigned) * 2 * (size_t)cnt);
        MPI_OK(MPI_Reduce(s, r, (int)cnt, affine, compose, root, comm));
        if (me == root)
            for (long i = 0; i < cnt; i++) {
                unsigned e[2];
                composed(n, i, salt, e);
                CHECKF(r[2 * i] == e[0] && r[2 * i + 1] == e[1], "non-commutative reduce %ld root %d i %ld", cnt, root, i);
            }
    }
}

/* Bytes around the thresholds: 64 KiB (cross-memory attach), pieces of
 * 64 KiB within a block, up to 4 MiB + 56. */
static const long bytes[] = {65528, 65536, 65544, 131080, 196616, 200008, 1048576, (4L << 20) + 56};
#define NBYTES ((int)(sizeof bytes / sizeof bytes[0]))

static void all(MPI_Comm comm, int salt)
{
    long most = bytes[NBYTES - 1];
    /* room for the odd int counts too */
    void *s = xmalloc((size_t)most + 64), *r = xmalloc((size_t)most + 64);
    for (int z = 0; z < NBYTES; z++) {
        doubles(comm, bytes[z] / 8, salt + z, s, r);
        ints(comm, bytes[z] / 4 + 1, salt + z, s, r); /* odd counts */
        noncommutative(comm, bytes[z] / 8, salt + z, s, r);
        strided(comm, bytes[z] / 16, salt + z, s, r);
    }
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int reps = argc > 1 ? atoi(argv[1]) : 2;
    MPI_OK(MPI_Type_contiguous(2, MPI_UNSIGNED, &affine));
    MPI_OK(MPI_Type_commit(&affine));
    MPI_OK(MPI_Op_create(compose_fn, 0, &compose));
    MPI_Comm rev;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, -t_rank, &rev));
    for (int rep = 0; rep < reps; rep++) {
        all(MPI_COMM_WORLD, rep);
        all(rev, rep + 7);
    }
    MPI_OK(MPI_Comm_free(&rev));
    MPI_OK(MPI_Op_free(&compose));
    MPI_OK(MPI_Type_free(&affine));
    t_done("bigreduce");
    return 0;
}
