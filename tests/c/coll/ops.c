/* ops.c - every predefined reduction operation on every C type it is
 * defined for, through MPI_Allreduce, MPI_Reduce and MPI_Reduce_local,
 * against a sequential fold; MINLOC/MAXLOC with ties on every pair type;
 * user operations: a non-commutative one (2x2 matrix product, checked for
 * rank order in reduce, allreduce, scan, exscan and reduce_scatter_block),
 * a commutative one over a large count, one over a non-contiguous datatype
 * (the function receives the datatype handle and walks its layout);
 * MPI_Op_commutative and MPI_Op_free; MPI_ERR_OP for undefined pairs.
 */
#include "coll.h"
#include <complex.h>
#include <stdbool.h>

#define K 5

/* The value rank r contributes at index i for operation o, in a range where
 * nothing overflows on 7 ranks for 8-bit types. */
static long long gen(int o, int r, int i, int is_signed)
{
    switch (o) {
    case 1: /* PROD: 1, 2, -1 */
        return r % 3 == 1 ? 2 : (r % 3 == 2 && is_signed ? -1 : 1);
    case 4: case 5: case 6: /* logical */
        return (r + i) % 3 == 0 ? 0 : (r * 3 + i) % 5 + 1;
    case 7: case 8: case 9: /* bitwise */
        return ((r * 37 + i * 11) & 0x7f);
    default:
        return (r * 5 + i * 3) % 9 - (is_signed ? 4 : 0);
    }
}

static const MPI_Op OPS[10] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND,
                               MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};

/* Operation o (index in OPS) on two values (all tests stay in range). */
static long long fold_ll(int o, long long a, long long b)
{
    switch (o) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return a < b ? a : b;
    case 3: return a > b ? a : b;
    case 4: return a && b;
    case 5: return a || b;
    case 6: return !a != !b;
    case 7: return a & b;
    case 8: return a | b;
    default: return a ^ b;
    }
}

#define FOLD_INT(T, o, a, b) ((T)fold_ll((o), (long long)(a), (long long)(b)))

/* Integer type T: every op from `first` to `last` (indices in OPS). */
#define TEST_INT(T, MT, SIGNED, FIRST, LAST)                                  \
    do {                                                                      \
        for (int o = (FIRST); o <= (LAST); o++) {                             \
            T s[K], r[K], e[K], io[K];                                        \
            for (int i = 0; i < K; i++) {                                     \
                s[i] = (T)gen(o, me, i, SIGNED);                              \
                e[i] = (T)gen(o, 0, i, SIGNED);                               \
                for (int q = 1; q < n; q++) {                                 \
                    T v = (T)gen(o, q, i, SIGNED);                            \
                    e[i] = FOLD_INT(T, o, e[i], v);                           \
                }                                                             \
            }                                                                 \
            MPI_OK(MPI_Allreduce(s, r, K, MT, OPS[o], MPI_COMM_WORLD));       \
            for (int i = 0; i < K; i++)                                       \
                CHECKF(r[i] == e[i], "%s op %d i %d", #MT, o, i);             \
            MPI_OK(MPI_Reduce(s, r, K, MT, OPS[o], n - 1, MPI_COMM_WORLD));   \
            if (me == n - 1)                                                  \
                for (int i = 0; i < K; i++)                                   \
                    CHECKF(r[i] == e[i], "reduce %s op %d i %d", #MT, o, i);  \
            for (int i = 0; i < K; i++) {                                     \
                io[i] = (T)gen(o, 1, i, SIGNED);                              \
                e[i] = FOLD_INT(T, o, s[i], io[i]);                           \
            }                                                                 \
            MPI_OK(MPI_Reduce_local(s, io, K, MT, OPS[o]));                   \
            for (int i = 0; i < K; i++)                                       \
                CHECKF(io[i] == e[i], "reduce_local %s op %d i %d", #MT, o, i); \
        }                                                                     \
    } while (0)

/* Floating type T: SUM, PROD, MIN, MAX (exact binary fractions). */
#define TEST_FLOAT(T, MT)                                                     \
    do {                                                                      \
        for (int o = 0; o < 4; o++) {                                         \
            T s[K], r[K], e[K];                                               \
            for (int i = 0; i < K; i++) {                                     \
                s[i] = (T)gen(o, me, i, 1) * (T)0.5;                          \
                e[i] = (T)gen(o, 0, i, 1) * (T)0.5;                           \
                for (int q = 1; q < n; q++) {                                 \
                    T v = (T)gen(o, q, i, 1) * (T)0.5;                        \
                    e[i] = o == 0 ? e[i] + v : o == 1 ? e[i] * v              \
                         : o == 2 ? (v < e[i] ? v : e[i]) : (v > e[i] ? v : e[i]); \
                }                                                             \
            }                                                                 \
            MPI_OK(MPI_Allreduce(s, r, K, MT, OPS[o], MPI_COMM_WORLD));       \
            for (int i = 0; i < K; i++)                                       \
                CHECKF(r[i] == e[i], "%s op %d i %d", #MT, o, i);             \
        }                                                                     \
    } while (0)

/* Complex type T: SUM and PROD. */
#define TEST_COMPLEX(T, MT)                                                   \
    do {                                                                      \
        for (int o = 0; o < 2; o++) {                                         \
            T s[K], r[K], e[K];                                               \
            for (int i = 0; i < K; i++) {                                     \
                s[i] = (T)(gen(o, me, i, 1) + gen(0, me, i + 1, 1) % 2 * I);  \
                e[i] = (T)(gen(o, 0, i, 1) + gen(0, 0, i + 1, 1) % 2 * I);    \
                for (int q = 1; q < n; q++) {                                 \
                    T v = (T)(gen(o, q, i, 1) + gen(0, q, i + 1, 1) % 2 * I); \
                    e[i] = o == 0 ? e[i] + v : e[i] * v;                      \
                }                                                             \
            }                                                                 \
            MPI_OK(MPI_Allreduce(s, r, K, MT, OPS[o], MPI_COMM_WORLD));       \
            for (int i = 0; i < K; i++)                                       \
                CHECKF(r[i] == e[i], "%s op %d i %d", #MT, o, i);             \
        }                                                                     \
    } while (0)

/* Pair type P {V v; I i;}: MINLOC and MAXLOC with many ties. */
#define TEST_PAIR(P, MT)                                                      \
    do {                                                                      \
        for (int o = 0; o < 2; o++) {                                         \
            P s[K], r[K], e[K];                                               \
            for (int i = 0; i < K; i++) {                                     \
                s[i].v = (me * 5 + i) % 3;                                    \
                s[i].i = (me * 7 + i) % 4;                                    \
                for (int q = 0; q < n; q++) {                                 \
                    P x;                                                      \
                    x.v = (q * 5 + i) % 3;                                    \
                    x.i = (q * 7 + i) % 4;                                    \
                    if (q == 0 || (o == 0 ? x.v < e[i].v : x.v > e[i].v)      \
                        || (x.v == e[i].v && x.i < e[i].i))                   \
                        e[i] = x;                                             \
                }                                                             \
            }                                                                 \
            MPI_OK(MPI_Allreduce(s, r, K, MT, o ? MPI_MAXLOC : MPI_MINLOC, MPI_COMM_WORLD)); \
            for (int i = 0; i < K; i++)                                       \
                CHECKF(r[i].v == e[i].v && r[i].i == e[i].i, "%s %s i %d",    \
                       #MT, o ? "maxloc" : "minloc", i);                      \
        }                                                                     \
    } while (0)

typedef struct { float v; int i; } float_int;
typedef struct { double v; int i; } double_int;
typedef struct { long v; int i; } long_int;
typedef struct { int v; int i; } int_int;
typedef struct { short v; int i; } short_int;
typedef struct { long double v; int i; } ldouble_int;

/* --------------------------------------------------------------- user ops */

static MPI_Datatype mat_t;
static int mat_calls;

/* inout = in x inout for 2x2 matrices of unsigned (wrapping) numbers. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != mat_t)
        FAILF("user function called with another datatype");
    unsigned *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        unsigned c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                         a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
    mat_calls++;
}

static void mat_of(int r, int k, unsigned *m)
{
    m[0] = (unsigned)(r + k + 1);
    m[1] = 1;
    m[2] = (unsigned)(k % 2);
    m[3] = (unsigned)r;
}

/* The product M(lo) x ... x M(hi - 1). */
static void mat_prod(int lo, int hi, int k, unsigned *out)
{
    unsigned acc[4] = {1, 0, 0, 1}, m[4];
    for (int r = lo; r < hi; r++) {
        mat_of(r, k, m);
        unsigned c[4] = {acc[0] * m[0] + acc[1] * m[2], acc[0] * m[1] + acc[1] * m[3],
                         acc[2] * m[0] + acc[3] * m[2], acc[2] * m[1] + acc[3] * m[3]};
        memcpy(acc, c, sizeof c);
    }
    memcpy(out, acc, sizeof acc);
}

static void check_mats(const unsigned *got, int lo, int hi, int count, const char *what)
{
    for (int k = 0; k < count; k++) {
        unsigned e[4];
        mat_prod(lo, hi, k, e);
        CHECKF(memcmp(got + 4 * k, e, sizeof e) == 0, "%s: matrix %d of ranks [%d, %d) out of order", what, k, lo, hi);
    }
}

static void test_noncommutative(int n, int me, MPI_Op op, int count)
{
    unsigned *s = xmalloc(sizeof(unsigned) * 4 * (size_t)count * (size_t)n);
    unsigned *r = xmalloc(sizeof(unsigned) * 4 * (size_t)count * (size_t)n);
    for (int k = 0; k < count; k++)
        mat_of(me, k, s + 4 * k);
    for (int root = 0; root < n; root += (n > 3 ? n / 2 : 1)) {
        MPI_OK(MPI_Reduce(s, r, count, mat_t, op, root, MPI_COMM_WORLD));
        if (me == root)
            check_mats(r, 0, n, count, "reduce");
    }
    MPI_OK(MPI_Allreduce(s, r, count, mat_t, op, MPI_COMM_WORLD));
    check_mats(r, 0, n, count, "allreduce");
    MPI_OK(MPI_Scan(s, r, count, mat_t, op, MPI_COMM_WORLD));
    check_mats(r, 0, me + 1, count, "scan");
    MPI_OK(MPI_Exscan(s, r, count, mat_t, op, MPI_COMM_WORLD));
    if (me > 0)
        check_mats(r, 0, me, count, "exscan");
    /* reduce_scatter_block: block q holds matrices k = q*count .. */
    for (int q = 0; q < n; q++)
        for (int k = 0; k < count; k++)
            mat_of(me, q * count + k, s + 4 * (q * count + k));
    MPI_OK(MPI_Reduce_scatter_block(s, r, count, mat_t, op, MPI_COMM_WORLD));
    for (int k = 0; k < count; k++) {
        unsigned e[4];
        mat_prod(0, n, me * count + k, e);
        CHECKF(memcmp(r + 4 * k, e, sizeof e) == 0, "reduce_scatter_block matrix %d", k);
    }
    free(s);
    free(r);
}

static void sum_ints(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] += a[i];
}

static MPI_Datatype strided; /* one int, extent two ints */

/* Sums the ints of a strided buffer: the layout comes with the datatype. */
static void sum_strided(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != strided)
        FAILF("sum_strided called with another datatype");
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[2 * i] += a[2 * i];
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int n = t_size, me = t_rank;

    TEST_INT(char, MPI_CHAR, 1, 0, 3);
    TEST_INT(signed char, MPI_SIGNED_CHAR, 1, 0, 9);
    TEST_INT(unsigned char, MPI_UNSIGNED_CHAR, 0, 0, 9);
    TEST_INT(short, MPI_SHORT, 1, 0, 9);
    TEST_INT(unsigned short, MPI_UNSIGNED_SHORT, 0, 0, 9);
    TEST_INT(int, MPI_INT, 1, 0, 9);
    TEST_INT(unsigned, MPI_UNSIGNED, 0, 0, 9);
    TEST_INT(long, MPI_LONG, 1, 0, 9);
    TEST_INT(unsigned long, MPI_UNSIGNED_LONG, 0, 0, 9);
    TEST_INT(long long, MPI_LONG_LONG, 1, 0, 9);
    TEST_INT(unsigned long long, MPI_UNSIGNED_LONG_LONG, 0, 0, 9);
    TEST_INT(int8_t, MPI_INT8_T, 1, 0, 9);
    TEST_INT(int16_t, MPI_INT16_T, 1, 0, 9);
    TEST_INT(int32_t, MPI_INT32_T, 1, 0, 9);
    TEST_INT(int64_t, MPI_INT64_T, 1, 0, 9);
    TEST_INT(uint8_t, MPI_UINT8_T, 0, 0, 9);
    TEST_INT(uint16_t, MPI_UINT16_T, 0, 0, 9);
    TEST_INT(uint32_t, MPI_UINT32_T, 0, 0, 9);
    TEST_INT(uint64_t, MPI_UINT64_T, 0, 0, 9);
    TEST_INT(MPI_Aint, MPI_AINT, 1, 0, 9);
    TEST_INT(MPI_Offset, MPI_OFFSET, 1, 0, 9);
    TEST_INT(MPI_Count, MPI_COUNT, 1, 0, 9);
    TEST_INT(bool, MPI_C_BOOL, 0, 4, 6);
    TEST_INT(unsigned char, MPI_BYTE, 0, 7, 9);
    TEST_FLOAT(float, MPI_FLOAT);
    TEST_FLOAT(double, MPI_DOUBLE);
    TEST_FLOAT(long double, MPI_LONG_DOUBLE);
    TEST_COMPLEX(float _Complex, MPI_C_FLOAT_COMPLEX);
    TEST_COMPLEX(double _Complex, MPI_C_DOUBLE_COMPLEX);
    TEST_COMPLEX(long double _Complex, MPI_C_LONG_DOUBLE_COMPLEX);
    TEST_PAIR(float_int, MPI_FLOAT_INT);
    TEST_PAIR(double_int, MPI_DOUBLE_INT);
    TEST_PAIR(long_int, MPI_LONG_INT);
    TEST_PAIR(int_int, MPI_2INT);
    TEST_PAIR(short_int, MPI_SHORT_INT);
    TEST_PAIR(ldouble_int, MPI_LONG_DOUBLE_INT);

    /* Operations not defined on a type (MPICH asserts on some of these, and
     * checks nothing on one process: madmpi only). */
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    if (is_madmpi()) {
        float f = 1, g = 0;
        int a = 1, b = 0;
        EXPECT_CLASS(MPI_Allreduce(&f, &g, 1, MPI_FLOAT, MPI_LAND, MPI_COMM_WORLD), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Allreduce(&f, &g, 1, MPI_FLOAT, MPI_BXOR, MPI_COMM_WORLD), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_MINLOC, MPI_COMM_WORLD), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_REPLACE, MPI_COMM_WORLD), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_NO_OP, MPI_COMM_WORLD), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
        double_int di[2] = {{1.0, 1}, {2.0, 2}};
        EXPECT_CLASS(MPI_Allreduce(di, di + 1, 1, MPI_DOUBLE_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Reduce_local(&a, &b, 1, MPI_BYTE, MPI_SUM), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Reduce_local(&a, &b, 1, MPI_INT, MPI_REPLACE), MPI_ERR_OP);
        EXPECT_CLASS(MPI_Reduce_local(&a, &b, 1, MPI_INT, MPI_NO_OP), MPI_ERR_OP);
        /* MPI_IN_PLACE where the standard does not allow it (the receive buffer), and the
         * send buffer passed again as the receive buffer: MPI_ERR_BUFFER, as in MPICH */
        int v[64] = {0};
        EXPECT_CLASS(MPI_Allreduce(v, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Allgather(v, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Alltoall(v, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Scan(v, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Exscan(v, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(
            MPI_Reduce_scatter_block(v, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Send(MPI_IN_PLACE, 1, MPI_INT, 0, 0, MPI_COMM_SELF), MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Allreduce(v, v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Allgather(v, 1, MPI_INT, v, 1, MPI_INT, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Alltoall(v, 1, MPI_INT, v, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        /* the send buffer passed as this process's own block of the receive buffer (MPICH's
         * errors/coll/noalias*): every rank sees it, none goes on into the collective alone */
        int cnt[8], dsp[8], me = t_rank;
        for (int i = 0; i < t_size; i++)
            cnt[i] = 2, dsp[i] = 2 * i;
        EXPECT_CLASS(MPI_Allgather(&v[me], 1, MPI_INT, v, 1, MPI_INT, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Allgatherv(&v[2 * me], 2, MPI_INT, v, cnt, dsp, MPI_INT, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Alltoallv(v, cnt, dsp, MPI_INT, v, cnt, dsp, MPI_INT, MPI_COMM_WORLD),
                     MPI_ERR_BUFFER);
        MPI_Request rq;
        EXPECT_CLASS(MPI_Iallgather(&v[me], 1, MPI_INT, v, 1, MPI_INT, MPI_COMM_WORLD, &rq),
                     MPI_ERR_BUFFER);
        dsp[0] = 4;
        EXPECT_CLASS(MPI_Gatherv(&v[4], 2, MPI_INT, v, cnt, dsp, MPI_INT, 0, MPI_COMM_SELF),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Igatherv(&v[4], 2, MPI_INT, v, cnt, dsp, MPI_INT, 0, MPI_COMM_SELF, &rq),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Scatterv(v, cnt, dsp, MPI_INT, &v[4], 2, MPI_INT, 0, MPI_COMM_SELF),
                     MPI_ERR_BUFFER);
        EXPECT_CLASS(MPI_Gather(v, 1, MPI_INT, v, 1, MPI_INT, 0, MPI_COMM_SELF), MPI_ERR_BUFFER);
        /* disjoint blocks of one array are fine */
        MPI_OK(MPI_Gatherv(&v[8], 2, MPI_INT, v, cnt, dsp, MPI_INT, 0, MPI_COMM_SELF));
        /* nothing moves: no error */
        MPI_OK(MPI_Allreduce(v, v, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        /* the communicator is still usable */
        MPI_OK(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(b == t_size);
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));

    /* Predefined operations are commutative. */
    int commute = -1;
    MPI_OK(MPI_Op_commutative(MPI_SUM, &commute));
    CHECK(commute == 1);

    /* Non-commutative user operation, in rank order. */
    MPI_OK(MPI_Type_contiguous(4, MPI_UNSIGNED, &mat_t));
    MPI_OK(MPI_Type_commit(&mat_t));
    MPI_Op matop;
    MPI_OK(MPI_Op_create(matmul, 0, &matop));
    MPI_OK(MPI_Op_commutative(matop, &commute));
    CHECK(commute == 0);
    test_noncommutative(n, me, matop, 1);
    test_noncommutative(n, me, matop, 3);
    test_noncommutative(n, me, matop, 300);
    CHECK(n == 1 || mat_calls > 0);
    {
        unsigned a[4], b[4], e[4];
        mat_of(0, 0, a);
        mat_of(1, 0, b);
        mat_prod(0, 2, 0, e);
        MPI_OK(MPI_Reduce_local(a, b, 1, mat_t, matop));
        CHECK(memcmp(b, e, sizeof e) == 0);
    }
    MPI_OK(MPI_Op_free(&matop));
    CHECK(matop == MPI_OP_NULL);

    /* Commutative user operation over a large count (long-message algorithms). */
    MPI_Op sumop;
    MPI_OK(MPI_Op_create(sum_ints, 1, &sumop));
    MPI_OK(MPI_Op_commutative(sumop, &commute));
    CHECK(commute == 1);
    {
        int cnt = 20000;
        int *s = xmalloc(sizeof(int) * (size_t)cnt), *r = xmalloc(sizeof(int) * (size_t)cnt);
        for (int i = 0; i < cnt; i++)
            s[i] = val(me, i, 40);
        MPI_OK(MPI_Allreduce(s, r, cnt, MPI_INT, sumop, MPI_COMM_WORLD));
        for (int i = 0; i < cnt; i++) {
            int e = 0;
            for (int q = 0; q < n; q++)
                e += val(q, i, 40);
            CHECKF(r[i] == e, "user sum i %d", i);
        }
        MPI_OK(MPI_Reduce(s, r, cnt, MPI_INT, sumop, 0, MPI_COMM_WORLD));
        if (me == 0)
            for (int i = 0; i < cnt; i++) {
                int e = 0;
                for (int q = 0; q < n; q++)
                    e += val(q, i, 40);
                CHECKF(r[i] == e, "user sum reduce i %d", i);
            }
        free(s);
        free(r);
    }
    MPI_OK(MPI_Op_free(&sumop));

    /* A user operation on a non-contiguous datatype. */
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &strided));
    MPI_OK(MPI_Type_commit(&strided));
    MPI_Op sop;
    MPI_OK(MPI_Op_create(sum_strided, 1, &sop));
    {
        int s[2 * K], r[2 * K];
        for (int i = 0; i < K; i++) {
            s[2 * i] = val(me, i, 41);
            s[2 * i + 1] = -3;
            r[2 * i] = -1;
            r[2 * i + 1] = 12345;
        }
        MPI_OK(MPI_Allreduce(s, r, K, strided, sop, MPI_COMM_WORLD));
        for (int i = 0; i < K; i++) {
            int e = 0;
            for (int q = 0; q < n; q++)
                e += val(q, i, 41);
            CHECKF(r[2 * i] == e && r[2 * i + 1] == 12345, "strided user op i %d", i);
        }
    }
    MPI_OK(MPI_Op_free(&sop));
    MPI_OK(MPI_Type_free(&strided));
    MPI_OK(MPI_Type_free(&mat_t));
    t_done("ops");
    return 0;
}
