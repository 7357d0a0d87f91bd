/* pack.c - MPI_Pack/MPI_Unpack round trips (several types packed one after
 * the other, small and large, the _c variants, the packed buffer sent as
 * MPI_PACKED and unpacked by the other rank), and MPI_Pack_external:
 * byte-exact big-endian "external32" images of the basic types and of
 * derived types with gaps, sizes from MPI_Pack_external_size, and
 * MPI_Unpack_external restoring the values without touching the gaps.
 *
 * 1 or 2 ranks. */
#include "../p2p/common.h"
#include <stddef.h>

struct rec {
    char c;
    double d;
    int i[3];
    short s;
};

static MPI_Datatype rec_type(void)
{
    int bl[4] = {1, 1, 3, 1};
    MPI_Aint dp[4] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i),
                      offsetof(struct rec, s)};
    MPI_Datatype ty[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
    MPI_Datatype t;
    MPI_OK(MPI_Type_create_struct(4, bl, dp, ty, &t));
    MPI_OK(MPI_Type_commit(&t));
    return t;
}

static void rec_fill(struct rec *r, long n, int salt)
{
    for (long k = 0; k < n; k++) {
        memset(&r[k], 0x5A, sizeof r[k]); /* the gaps too */
        r[k].c = (char)('A' + (k + salt) % 26);
        r[k].d = (double)k * 1.25 + salt;
        for (int j = 0; j < 3; j++)
            r[k].i[j] = (int)(k * 3 + j + salt);
        r[k].s = (short)(k - salt);
    }
}

static void rec_check(const struct rec *r, long n, int salt, const char *what)
{
    for (long k = 0; k < n; k++) {
        CHECKF(r[k].c == (char)('A' + (k + salt) % 26) && r[k].d == (double)k * 1.25 + salt &&
                   r[k].i[0] == (int)(k * 3 + salt) && r[k].i[2] == (int)(k * 3 + 2 + salt) &&
                   r[k].s == (short)(k - salt),
               "%s: record %ld differs", what, k);
        /* the gap between c and d is not data: never written */
        const unsigned char *p = (const unsigned char *)&r[k];
        for (size_t g = 1; g < offsetof(struct rec, d); g++)
            CHECKF(p[g] == 0xA5, "%s: record %ld: gap byte %zu written", what, k, g);
    }
}

/* ---------------------------------------------------------------- native */

/* Pack an int triple, `nv` every-other doubles (vector) and `nr` records one after the other,
 * unpack them in the same order, and send the packed bytes to `peer` as MPI_PACKED. */
static void native(long nv, long nr)
{
    int other = (t_rank + 1) % t_size;
    MPI_Datatype vec, rec = rec_type();
    MPI_OK(MPI_Type_vector((int)nv, 1, 2, MPI_DOUBLE, &vec));
    MPI_OK(MPI_Type_commit(&vec));
    int three[3] = {7, -8, 9};
    double *v = (double *)xmalloc((size_t)(2 * nv) * sizeof(double));
    for (long k = 0; k < 2 * nv; k++)
        v[k] = (double)k + 0.5;
    struct rec *r = (struct rec *)xmalloc((size_t)nr * sizeof(struct rec));
    rec_fill(r, nr, 3);

    int s1, s2, s3;
    MPI_OK(MPI_Pack_size(3, MPI_INT, MPI_COMM_WORLD, &s1));
    MPI_OK(MPI_Pack_size(1, vec, MPI_COMM_WORLD, &s2));
    MPI_OK(MPI_Pack_size((int)nr, rec, MPI_COMM_WORLD, &s3));
    CHECK(s1 >= 12 && s2 >= (int)(8 * nv) && s3 >= (int)(23 * nr));
    int cap = s1 + s2 + s3;
    unsigned char *buf = (unsigned char *)xmalloc((size_t)cap);
    int pos = 0;
    MPI_OK(MPI_Pack(three, 3, MPI_INT, buf, cap, &pos, MPI_COMM_WORLD));
    MPI_OK(MPI_Pack(v, 1, vec, buf, cap, &pos, MPI_COMM_WORLD));
    MPI_OK(MPI_Pack(r, (int)nr, rec, buf, cap, &pos, MPI_COMM_WORLD));
    CHECK(pos > 0 && pos <= cap);
    if (is_madmpi()) {
        /* madmpi's native packed form is the data bytes in type-map order */
        CHECK(pos == (int)(12 + 8 * nv + 23 * nr));
        double d;
        memcpy(&d, buf + 12 + 8 * (nv - 1), 8);
        CHECK(d == (double)(2 * (nv - 1)) + 0.5);
    }

    /* unpack here */
    int back[3] = {0, 0, 0};
    double *v2 = (double *)xmalloc((size_t)(2 * nv) * sizeof(double));
    for (long k = 0; k < 2 * nv; k++)
        v2[k] = -1.0;
    struct rec *r2 = (struct rec *)xmalloc((size_t)nr * sizeof(struct rec));
    memset(r2, 0xA5, (size_t)nr * sizeof(struct rec));
    int up = 0;
    MPI_OK(MPI_Unpack(buf, pos, &up, back, 3, MPI_INT, MPI_COMM_WORLD));
    MPI_OK(MPI_Unpack(buf, pos, &up, v2, 1, vec, MPI_COMM_WORLD));
    MPI_OK(MPI_Unpack(buf, pos, &up, r2, (int)nr, rec, MPI_COMM_WORLD));
    CHECK(up == pos);
    CHECK(back[0] == 7 && back[1] == -8 && back[2] == 9);
    for (long k = 0; k < 2 * nv; k++)
        CHECKF(v2[k] == (k % 2 ? -1.0 : (double)k + 0.5), "unpacked vector: v[%ld] = %g", k, v2[k]);
    rec_check(r2, nr, 3, "unpacked records");

    /* the packed bytes travel as MPI_PACKED and are unpacked by the other rank */
    MPI_Request q;
    unsigned char *in = (unsigned char *)xmalloc((size_t)cap);
    MPI_Status st;
    MPI_OK(MPI_Irecv(in, cap, MPI_PACKED, other, 11, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(buf, pos, MPI_PACKED, other, 11, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q, &st));
    int got = 0;
    MPI_OK(MPI_Get_count(&st, MPI_PACKED, &got));
    CHECK(got == pos);
    memset(r2, 0xA5, (size_t)nr * sizeof(struct rec));
    for (long k = 0; k < 2 * nv; k++)
        v2[k] = -1.0;
    up = 0;
    MPI_OK(MPI_Unpack(in, got, &up, back, 3, MPI_INT, MPI_COMM_WORLD));
    MPI_OK(MPI_Unpack(in, got, &up, v2, 1, vec, MPI_COMM_WORLD));
    MPI_OK(MPI_Unpack(in, got, &up, r2, (int)nr, rec, MPI_COMM_WORLD));
    CHECK(up == got);
    CHECK(v2[2 * (nv - 1)] == (double)(2 * (nv - 1)) + 0.5 && v2[1] == -1.0);
    rec_check(r2, nr, 3, "records unpacked from MPI_PACKED");

    /* the large-count variants agree */
    MPI_Count sc = 0, cpos = 0, cup = 0;
    MPI_OK(MPI_Pack_size_c((MPI_Count)nr, rec, MPI_COMM_WORLD, &sc));
    CHECK(sc == s3);
    unsigned char *cbuf = (unsigned char *)xmalloc((size_t)sc + 8);
    cpos = 8;
    MPI_OK(MPI_Pack_c(r, (MPI_Count)nr, rec, cbuf, sc + 8, &cpos, MPI_COMM_WORLD));
    CHECK(cpos > 8 && cpos <= sc + 8);
    memset(r2, 0xA5, (size_t)nr * sizeof(struct rec));
    cup = 8;
    MPI_OK(MPI_Unpack_c(cbuf, cpos, &cup, r2, (MPI_Count)nr, rec, MPI_COMM_WORLD));
    CHECK(cup == cpos);
    rec_check(r2, nr, 3, "records through MPI_Pack_c/MPI_Unpack_c");

    free(cbuf);
    free(in);
    free(r2);
    free(v2);
    free(buf);
    free(r);
    free(v);
    MPI_OK(MPI_Type_free(&vec));
    MPI_OK(MPI_Type_free(&rec));
}

/* ---------------------------------------------------------------- external32 */

static void expect_bytes(const unsigned char *got, const unsigned char *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECKF(got[i] == want[i], "%s: byte %zu is %02x, expected %02x", what, i, got[i], want[i]);
}

/* Pack `count` of `t` at `in` in external32 and compare with `want` (n bytes); unpack into
 * `back` and compare its first `bytes` bytes with `in`. */
static void ext(const void *in, int count, MPI_Datatype t, const unsigned char *want, size_t n,
                void *back, size_t bytes, const char *what)
{
    MPI_Aint size = -1;
    MPI_OK(MPI_Pack_external_size("external32", count, t, &size));
    CHECKF(size == (MPI_Aint)n, "%s: Pack_external_size %ld, expected %zu", what, (long)size, n);
    unsigned char out[256];
    memset(out, 0xCC, sizeof out);
    MPI_Aint pos = 3; /* not at the start of the buffer */
    MPI_OK(MPI_Pack_external("external32", in, count, t, out, (MPI_Aint)sizeof out, &pos));
    CHECKF(pos == (MPI_Aint)(3 + n), "%s: position %ld, expected %zu", what, (long)pos, 3 + n);
    CHECK(out[0] == 0xCC && out[2] == 0xCC && out[3 + n] == 0xCC);
    expect_bytes(out + 3, want, n, what);
    MPI_Aint up = 3;
    MPI_OK(MPI_Unpack_external("external32", out, pos, &up, back, count, t));
    CHECK(up == pos);
    CHECKF(memcmp(back, in, bytes) == 0, "%s: unpacked values differ", what);

    /* the _c variants agree */
    MPI_Count csize = -1, cpos = 0, cup = 0;
    MPI_OK(MPI_Pack_external_size_c("external32", count, t, &csize));
    CHECK(csize == (MPI_Count)n);
    unsigned char out2[256];
    MPI_OK(MPI_Pack_external_c("external32", in, count, t, out2, (MPI_Count)sizeof out2, &cpos));
    CHECK(cpos == (MPI_Count)n);
    expect_bytes(out2, want, n, what);
    MPI_OK(MPI_Unpack_external_c("external32", out2, cpos, &cup, back, count, t));
    CHECK(cup == cpos);
}

static void external32(void)
{
    {
        int32_t v[2] = {0x01020304, -2}, b[2];
        const unsigned char w[] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe};
        ext(v, 2, MPI_INT32_T, w, sizeof w, b, sizeof v, "MPI_INT32_T");
        int vi[2] = {0x01020304, -2}, bi[2];
        ext(vi, 2, MPI_INT, w, sizeof w, bi, sizeof vi, "MPI_INT");
    }
    {
        short v[2] = {0x0102, -1}, b[2];
        const unsigned char w[] = {1, 2, 0xff, 0xff};
        ext(v, 2, MPI_SHORT, w, sizeof w, b, sizeof v, "MPI_SHORT");
    }
    {
        /* long and unsigned long are 4 bytes in external32 whatever the platform's long (the
         * standard's table; MPICH packs them so) */
        long v[2] = {0x01020304L, -5L}, b[2];
        const unsigned char w[] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfb};
        ext(v, 2, MPI_LONG, w, sizeof w, b, sizeof v, "MPI_LONG");
        unsigned long u = 0xfffffffeUL, ub;
        const unsigned char wu[] = {0xff, 0xff, 0xff, 0xfe};
        ext(&u, 1, MPI_UNSIGNED_LONG, wu, sizeof wu, &ub, sizeof u, "MPI_UNSIGNED_LONG");
    }
    {
        int64_t v = 0x0102030405060708LL, b;
        const unsigned char w[] = {1, 2, 3, 4, 5, 6, 7, 8};
        ext(&v, 1, MPI_INT64_T, w, sizeof w, &b, sizeof v, "MPI_INT64_T");
    }
    {
        double v[2] = {1.0, -2.5}, b[2];
        const unsigned char w[] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xc0, 0x04, 0, 0, 0, 0, 0, 0};
        ext(v, 2, MPI_DOUBLE, w, sizeof w, b, sizeof v, "MPI_DOUBLE");
    }
    {
        float v = 1.5f, b;
        const unsigned char w[] = {0x3f, 0xc0, 0, 0};
        ext(&v, 1, MPI_FLOAT, w, sizeof w, &b, sizeof v, "MPI_FLOAT");
    }
    {
        char v[3] = {'A', 'b', 0}, b[3];
        const unsigned char w[] = {0x41, 0x62, 0};
        ext(v, 3, MPI_CHAR, w, sizeof w, b, sizeof v, "MPI_CHAR");
    }
    {
        /* every other int of 6: 3 ints, big-endian, the gaps not in the image */
        MPI_Datatype t;
        MPI_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &t));
        MPI_OK(MPI_Type_commit(&t));
        int v[5] = {0x11223344, -1, 5, -1, 0x7fffffff}, b[5] = {0, 99, 0, 99, 0};
        const unsigned char w[] = {0x11, 0x22, 0x33, 0x44, 0, 0, 0, 5, 0x7f, 0xff, 0xff, 0xff};
        int want_back[5] = {0x11223344, 99, 5, 99, 0x7fffffff};
        ext(v, 1, t, w, sizeof w, b, 0, "vector of MPI_INT");
        CHECK(memcmp(b, want_back, sizeof b) == 0);
        MPI_OK(MPI_Type_free(&t));
    }
    if (is_madmpi()) {
        /* a struct with gaps: char, double, int[3], short = 23 bytes, no padding (MPICH 4.0
         * crashes computing the external32 size of a struct type) */
        MPI_Datatype t = rec_type();
        struct rec v, b;
        memset(&v, 0, sizeof v);
        v.c = 'z';
        v.d = 2.0;
        v.i[0] = 1;
        v.i[1] = 256;
        v.i[2] = -1;
        v.s = 0x0a0b;
        memset(&b, 0xA5, sizeof b);
        const unsigned char w[] = {0x7a, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0,
                                   1,    0,    0xff, 0xff, 0xff, 0xff, 0x0a, 0x0b};
        ext(&v, 1, t, w, sizeof w, &b, 0, "struct with gaps");
        CHECK(b.c == 'z' && b.d == 2.0 && b.i[1] == 256 && b.i[2] == -1 && b.s == 0x0a0b);
        const unsigned char *p = (const unsigned char *)&b;
        CHECK(p[1] == 0xA5 && p[offsetof(struct rec, d) - 1] == 0xA5);
        MPI_OK(MPI_Type_free(&t));
    }
    if (is_madmpi()) {
        /* MPI_DOUBLE_INT: 8 + 4 bytes, no padding (MPICH 4.0 has no external32 form of the
         * pair types) */
        struct {
            double d;
            int i;
        } v = {-1.0, 3}, b = {0.0, 0};
        const unsigned char w[] = {0xbf, 0xf0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
        ext(&v, 1, MPI_DOUBLE_INT, w, sizeof w, &b, 0, "MPI_DOUBLE_INT");
        CHECK(b.d == -1.0 && b.i == 3);
        /* a long that does not fit the 4 bytes of external32: a conversion error */
        if (sizeof(long) > 4) {
            long big = 1L << 40;
            unsigned char out[8];
            MPI_Aint pos = 0;
            MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
            EXPECT_CLASS(MPI_Pack_external("external32", &big, 1, MPI_LONG, out,
                                           (MPI_Aint)sizeof out, &pos),
                         MPI_ERR_CONVERSION);
            MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
        }
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size <= 2);
    native(10, 5);
    native(200000, 50000);
    external32();
    t_done("pack");
    return 0;
}
