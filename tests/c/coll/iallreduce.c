/* iallreduce.c - large MPI_Iallreduce (from 64 KiB, where madmpi's
 * non-blocking allreduce goes by cross-memory attach on one node with 3 ranks
 * or more) checked against sequential references:
 *
 * - every predefined commutative operation on the types it applies to (C
 *   integers of several widths, floating point, the pair types for
 *   MINLOC/MAXLOC, MPI_BYTE for the bitwise ones) and a commutative user
 *   operation; counts that divide neither among the ranks nor into pieces,
 *   with a guard element after the vector; separate buffers and MPI_IN_PLACE;
 * - a derived datatype with gaps (every other double: packed, then unpacked);
 * - more non-blocking allreduces in flight on one communicator at once than
 *   the implementation has claim words (12), completed in reverse order,
 *   interleaved with blocking collectives and an MPI_Ibcast;
 * - a persistent MPI_Allreduce_init started several times;
 * - a communicator whose shared-memory area does not exist yet (no blocking
 *   collective on it), and one on which rank 0 starts a large MPI_Iallreduce
 *   before the blocking collective that makes the area and the others after
 *   it (not standard, but tolerated: every rank must then take the same
 *   path).
 *
 * Argument: repetitions (default 1).
 */
#include "coll.h"

#define GUARD 0x5a

static long counts[] = {8192 + 1, 16384 + 3, 65536 + 5, (1L << 19) + 7};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

/* Contribution of rank r at i, small enough that a product of 7 stays
 * exact in every type. */
static long lval(int r, long i, int s)
{
    return (long)((r * 37 + i * 11 + s * 5) % 7) + (r == (int)(i % 5) ? -3 : 1);
}

#define REF(T, EXPR_INIT, EXPR_STEP)                                             \
    do {                                                                         \
        T *e_ = exp;                                                             \
        for (long i = 0; i < cnt; i++) {                                         \
            T a = (T)(EXPR_INIT);                                                \
            for (int q = 1; q < n; q++) {                                        \
                T b = (T)lval(q, i, sl);                                         \
                a = (T)(EXPR_STEP);                                              \
            }                                                                    \
            e_[i] = a;                                                           \
        }                                                                        \
    } while (0)

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] += a[i];
}

static MPI_Op usum;

/* One operation on one type, blocking wait, in place or not. */
static void one(MPI_Comm comm, MPI_Datatype dt, size_t esz, MPI_Op op, const char *what,
                long cnt, int salt, int inplace, void *s, void *r, void *exp,
                void (*fill)(void *, long, int, int))
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    fill(s, cnt, me, salt);
    if (inplace)
        memcpy(r, s, esz * (size_t)cnt);
    else
        memset(r, 0x11, esz * (size_t)cnt);
    memset((char *)r + esz * (size_t)cnt, GUARD, esz);
    MPI_Request q;
    MPI_OK(MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, (int)cnt, dt, op, comm, &q));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (memcmp(r, exp, esz * (size_t)cnt) != 0) {
        for (long i = 0; i < cnt; i++)
            CHECKF(memcmp((char *)r + esz * (size_t)i, (char *)exp + esz * (size_t)i, esz) == 0,
                   "%s count %ld (in place %d, %d ranks): element %ld differs", what, cnt,
                   inplace, n, i);
    }
    for (size_t k = 0; k < esz; k++)
        CHECKF(((unsigned char *)r)[esz * (size_t)cnt + k] == GUARD,
               "%s count %ld: wrote past the end", what, cnt);
}

#define FILL(NAME, T)                                                            \
    static void NAME(void *p, long cnt, int me, int salt)                        \
    {                                                                            \
        T *v = p;                                                                \
        for (long i = 0; i < cnt; i++)                                           \
            v[i] = (T)lval(me, i, salt);                                         \
    }
FILL(fill_int, int)
FILL(fill_long, long)
FILL(fill_short, short)
FILL(fill_uchar, unsigned char)
FILL(fill_double, double)
FILL(fill_float, float)

struct di {
    double v;
    int i;
};

static void fill_di(void *p, long cnt, int me, int salt)
{
    struct di *v = p;
    for (long i = 0; i < cnt; i++) {
        v[i].v = (double)(lval(me, i, salt) % 3);
        v[i].i = (me * 5 + (int)i) % 4;
    }
}

static void ops(MPI_Comm comm, long cnt, int salt, void *s, void *r, void *exp)
{
    int n;
    MPI_OK(MPI_Comm_size(comm, &n));
    for (int inplace = 0; inplace < 2; inplace++) {
        int sl = salt + inplace;
        REF(int, lval(0, i, sl), a + b);
        one(comm, MPI_INT, sizeof(int), MPI_SUM, "int sum", cnt, sl, inplace, s, r, exp, fill_int);
        one(comm, MPI_INT, sizeof(int), usum, "int user sum", cnt, sl, inplace, s, r, exp, fill_int);
        REF(int, lval(0, i, sl), a * b);
        one(comm, MPI_INT, sizeof(int), MPI_PROD, "int prod", cnt, sl, inplace, s, r, exp, fill_int);
        REF(long, lval(0, i, sl), a < b ? a : b);
        one(comm, MPI_LONG, sizeof(long), MPI_MIN, "long min", cnt, sl, inplace, s, r, exp, fill_long);
        REF(short, lval(0, i, sl), a > b ? a : b);
        one(comm, MPI_SHORT, sizeof(short), MPI_MAX, "short max", cnt, sl, inplace, s, r, exp, fill_short);
        REF(int, lval(0, i, sl), a && b);
        one(comm, MPI_INT, sizeof(int), MPI_LAND, "int land", cnt, sl, inplace, s, r, exp, fill_int);
        REF(int, lval(0, i, sl), a || b);
        one(comm, MPI_INT, sizeof(int), MPI_LOR, "int lor", cnt, sl, inplace, s, r, exp, fill_int);
        REF(int, lval(0, i, sl) != 0, (a != 0) != (b != 0));
        one(comm, MPI_INT, sizeof(int), MPI_LXOR, "int lxor", cnt, sl, inplace, s, r, exp, fill_int);
        REF(unsigned char, lval(0, i, sl), a & b);
        one(comm, MPI_BYTE, 1, MPI_BAND, "byte band", cnt, sl, inplace, s, r, exp, fill_uchar);
        REF(long, lval(0, i, sl), a | b);
        one(comm, MPI_LONG, sizeof(long), MPI_BOR, "long bor", cnt, sl, inplace, s, r, exp, fill_long);
        REF(unsigned char, lval(0, i, sl), a ^ b);
        one(comm, MPI_UNSIGNED_CHAR, 1, MPI_BXOR, "uchar bxor", cnt, sl, inplace, s, r, exp, fill_uchar);
        REF(double, lval(0, i, sl), a + b);
        one(comm, MPI_DOUBLE, sizeof(double), MPI_SUM, "double sum", cnt, sl, inplace, s, r, exp, fill_double);
        REF(float, lval(0, i, sl), a * b);
        one(comm, MPI_FLOAT, sizeof(float), MPI_PROD, "float prod", cnt, sl, inplace, s, r, exp, fill_float);
    }
}

/* MINLOC/MAXLOC on MPI_DOUBLE_INT compared field by field (the struct's
 * padding is not data). */
static void pairs(MPI_Comm comm, long cnt, int salt, struct di *s, struct di *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    for (int mx = 0; mx < 2; mx++)
        for (int inplace = 0; inplace < 2; inplace++) {
            fill_di(s, cnt, me, salt + mx);
            if (inplace)
                memcpy(r, s, sizeof *s * (size_t)cnt);
            MPI_Request q;
            MPI_OK(MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, (int)cnt, MPI_DOUBLE_INT,
                                  mx ? MPI_MAXLOC : MPI_MINLOC, comm, &q));
            MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
            for (long i = 0; i < cnt; i++) {
                struct di a = {(double)(lval(0, i, salt + mx) % 3), (int)i % 4};
                for (int p = 1; p < n; p++) {
                    struct di b = {(double)(lval(p, i, salt + mx) % 3), (p * 5 + (int)i) % 4};
                    int better = mx ? b.v > a.v : b.v < a.v;
                    if (better || (b.v == a.v && b.i < a.i))
                        a = b;
                }
                CHECKF(r[i].v == a.v && r[i].i == a.i, "%s count %ld (in place %d) i %ld: (%g, %d), expected (%g, %d)",
                       mx ? "maxloc" : "minloc", cnt, inplace, i, r[i].v, r[i].i, a.v, a.i);
            }
        }
}

/* Every other double (a type with gaps): the gaps stay as they were. */
static void strided(MPI_Comm comm, long cnt, int salt, double *s, double *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    MPI_Datatype one_d, every_other;
    MPI_OK(MPI_Type_contiguous(1, MPI_DOUBLE, &one_d));
    MPI_OK(MPI_Type_create_resized(one_d, 0, 2 * (MPI_Aint)sizeof(double), &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    for (int inplace = 0; inplace < 2; inplace++) {
        for (long i = 0; i < cnt; i++) {
            s[2 * i] = (double)lval(me, i, salt + inplace);
            s[2 * i + 1] = -7;
            r[2 * i] = inplace ? s[2 * i] : -1;
            r[2 * i + 1] = -3;
        }
        MPI_Request q;
        MPI_OK(MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, (int)cnt, every_other, MPI_SUM, comm, &q));
        MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (long i = 0; i < cnt; i++) {
            double e = 0;
            for (int p = 0; p < n; p++)
                e += (double)lval(p, i, salt + inplace);
            CHECKF(r[2 * i] == e, "strided count %ld (in place %d) i %ld: %g, expected %g", cnt, inplace, i, r[2 * i], e);
            CHECKF(r[2 * i + 1] == -3, "strided count %ld: gap %ld written", cnt, i);
        }
    }
    MPI_OK(MPI_Type_free(&every_other));
    MPI_OK(MPI_Type_free(&one_d));
}

static double dsum(int n, long i, int salt)
{
    double e = 0;
    for (int p = 0; p < n; p++)
        e += (double)lval(p, i, salt);
    return e;
}

/* INFLIGHT large allreduces at once on one communicator (some in place),
 * with blocking collectives and an MPI_Ibcast between the starts, completed
 * in reverse order. */
#define INFLIGHT 12
static void concurrent(MPI_Comm comm, long cnt, int salt)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    double *s[INFLIGHT], *r[INFLIGHT];
    MPI_Request q[INFLIGHT + 1];
    int bval = me == 0 ? 4242 + salt : -1;
    for (int k = 0; k < INFLIGHT; k++) {
        s[k] = xmalloc(sizeof(double) * (size_t)cnt);
        r[k] = xmalloc(sizeof(double) * (size_t)cnt);
        for (long i = 0; i < cnt; i++) {
            s[k][i] = (double)lval(me, i, salt + k);
            r[k][i] = k % 3 == 0 ? s[k][i] : -1;
        }
        MPI_OK(MPI_Iallreduce(k % 3 == 0 ? MPI_IN_PLACE : s[k], r[k], (int)cnt, MPI_DOUBLE, MPI_SUM, comm, &q[k]));
        if (k == 4)
            MPI_OK(MPI_Barrier(comm));
        if (k == 6) {
            double x = me, y = 0;
            MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm));
            CHECKF(y == (double)n * (n - 1) / 2, "blocking allreduce between: %g", y);
        }
        if (k == 7)
            MPI_OK(MPI_Ibcast(&bval, 1, MPI_INT, 0, comm, &q[INFLIGHT]));
    }
    for (int k = INFLIGHT; k >= 0; k--)
        MPI_OK(MPI_Wait(&q[k], MPI_STATUS_IGNORE));
    CHECKF(bval == 4242 + salt, "ibcast between: %d", bval);
    for (int k = 0; k < INFLIGHT; k++) {
        for (long i = 0; i < cnt; i++)
            CHECKF(r[k][i] == dsum(n, i, salt + k), "in flight %d count %ld i %ld: %g", k, cnt, i, r[k][i]);
        free(s[k]);
        free(r[k]);
    }
}

/* MPI_Allreduce_init, started several times with new values (MPI 4). */
#if MPI_VERSION >= 4
static void persistent(MPI_Comm comm, long cnt, int salt, double *s, double *r)
{
    int n, me;
    MPI_OK(MPI_Comm_size(comm, &n));
    MPI_OK(MPI_Comm_rank(comm, &me));
    MPI_Request q;
    MPI_OK(MPI_Allreduce_init(s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &q));
    for (int k = 0; k < 3; k++) {
        for (long i = 0; i < cnt; i++) {
            s[i] = (double)lval(me, i, salt + k);
            r[i] = -1;
        }
        MPI_OK(MPI_Start(&q));
        MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (long i = 0; i < cnt; i++)
            CHECKF(r[i] == dsum(n, i, salt + k), "persistent start %d count %ld i %ld: %g", k, cnt, i, r[i]);
    }
    MPI_OK(MPI_Request_free(&q));
}
#endif

/* A large allreduce on a new communicator (no area yet); then rank 0 starts
 * one before the blocking collective that makes the area (the third on the
 * communicator) and the others after it; then the operations with the area. */
static void before_area(long cnt, int salt, double *s, double *r, void *exp)
{
    MPI_Comm c;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    int n, me;
    MPI_OK(MPI_Comm_size(c, &n));
    MPI_OK(MPI_Comm_rank(c, &me));
    for (int k = 0; k < 2; k++) {
        for (long i = 0; i < cnt; i++) {
            s[i] = (double)lval(me, i, salt + k);
            r[i] = -1;
        }
        MPI_Request q;
        if (k == 1 && me != 0)
            MPI_OK(MPI_Barrier(c));
        MPI_OK(MPI_Iallreduce(s, r, (int)cnt, MPI_DOUBLE, MPI_SUM, c, &q));
        if (k == 1 && me == 0)
            MPI_OK(MPI_Barrier(c));
        MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (long i = 0; i < cnt; i++)
            CHECKF(r[i] == dsum(n, i, salt + k), "before the area (%d) count %ld i %ld: %g", k, cnt, i, r[i]);
        if (k == 0) {
            MPI_OK(MPI_Barrier(c));
            MPI_OK(MPI_Barrier(c));
        }
    }
    ops(c, cnt, salt, s, r, exp);
    MPI_OK(MPI_Comm_free(&c));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int reps = argc > 1 ? atoi(argv[1]) : 1;
    MPI_OK(MPI_Op_create(user_sum, 1, &usum));
    long most = counts[NCOUNTS - 1];
    size_t bytes = sizeof(struct di) * (size_t)(most + 1) * 2;
    void *s = xmalloc(bytes), *r = xmalloc(bytes), *exp = xmalloc(bytes);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int rep = 0; rep < reps; rep++) {
        for (int z = 0; z < NCOUNTS; z++) {
            ops(MPI_COMM_WORLD, counts[z], rep + z, s, r, exp);
            pairs(MPI_COMM_WORLD, counts[z], rep + z, s, r);
            strided(MPI_COMM_WORLD, counts[z], rep + z, s, r);
        }
        concurrent(MPI_COMM_WORLD, counts[2], rep);
#if MPI_VERSION >= 4
        persistent(MPI_COMM_WORLD, counts[2], rep, s, r);
#endif
        before_area(counts[2], rep, s, r, exp);
    }
    free(s);
    free(r);
    free(exp);
    MPI_OK(MPI_Op_free(&usum));
    t_done("iallreduce");
    return 0;
}
