/* decode.c - type queries on one rank: envelope and contents of every
 * combiner, decoded recursively through a nested type (the returned derived
 * types are new handles that can be used and freed, the predefined ones are
 * the predefined handles), the _c variants on large-count types, sizes and
 * extents (MPI_UNDEFINED when a size does not fit an int), names, the f90
 * parameterized types, MPI_Type_match_size and MPI_Type_get_value_index;
 * attributes copied by MPI_Type_dup and deleted by MPI_Type_free.
 *
 * Any number of ranks (each checks on its own). */
#include "../p2p/common.h"
#include <stddef.h>

typedef struct {
    int ni, na, nd, comb;
    int ints[32];
    MPI_Aint addrs[16];
    MPI_Datatype types[16];
} decoded;

static decoded decode(MPI_Datatype t, int combiner)
{
    decoded d;
    memset(&d, 0, sizeof d);
    MPI_OK(MPI_Type_get_envelope(t, &d.ni, &d.na, &d.nd, &d.comb));
    CHECKF(d.comb == combiner, "combiner %d, expected %d", d.comb, combiner);
    CHECK(d.ni <= 32 && d.na <= 16 && d.nd <= 16);
    MPI_OK(MPI_Type_get_contents(t, d.ni, d.na, d.nd, d.ints, d.addrs, d.types));
    return d;
}

static void expect_ints(const decoded *d, const int *want, int n, const char *what)
{
    CHECKF(d->ni == n, "%s: %d integers, expected %d", what, d->ni, n);
    for (int i = 0; i < n; i++)
        CHECKF(d->ints[i] == want[i], "%s: integer %d is %d, expected %d", what, i, d->ints[i],
               want[i]);
}

static void expect_addrs(const decoded *d, const MPI_Aint *want, int n, const char *what)
{
    CHECKF(d->na == n, "%s: %d addresses, expected %d", what, d->na, n);
    for (int i = 0; i < n; i++)
        CHECKF(d->addrs[i] == want[i], "%s: address %d is %ld, expected %ld", what, i,
               (long)d->addrs[i], (long)want[i]);
}

static int combiner_of(MPI_Datatype t)
{
    int ni, na, nd, c;
    MPI_OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &c));
    return c;
}

/* A returned type that is not predefined is a new handle: free it. */
static void release(MPI_Datatype t)
{
    if (combiner_of(t) != MPI_COMBINER_NAMED)
        MPI_OK(MPI_Type_free(&t));
}

static int size_of(MPI_Datatype t)
{
    int s = -1;
    MPI_OK(MPI_Type_size(t, &s));
    return s;
}

/* struct { indexed(resized(vector)), char, hvector }, dup'ed, decoded back down. */
static void nested(void)
{
    MPI_Datatype v, r, ix, hv, st, d;
    MPI_OK(MPI_Type_vector(3, 2, 4, MPI_INT, &v));
    MPI_OK(MPI_Type_create_resized(v, -4, 64, &r));
    int ibl[2] = {1, 3}, idp[2] = {5, 0};
    MPI_OK(MPI_Type_indexed(2, ibl, idp, r, &ix));
    MPI_OK(MPI_Type_create_hvector(2, 1, 200, MPI_DOUBLE, &hv));
    int sbl[3] = {1, 2, 1};
    MPI_Aint sdp[3] = {0, 16, 400};
    MPI_Datatype sty[3] = {ix, MPI_CHAR, hv};
    MPI_OK(MPI_Type_create_struct(3, sbl, sdp, sty, &st));
    MPI_OK(MPI_Type_dup(st, &d));

    decoded dd = decode(d, MPI_COMBINER_DUP);
    CHECK(dd.ni == 0 && dd.na == 0 && dd.nd == 1);
    MPI_Datatype st2 = dd.types[0];
    CHECK(st2 != MPI_DATATYPE_NULL && size_of(st2) == size_of(st));

    decoded ds = decode(st2, MPI_COMBINER_STRUCT);
    int si[4] = {3, 1, 2, 1};
    expect_ints(&ds, si, 4, "struct");
    expect_addrs(&ds, sdp, 3, "struct");
    CHECK(ds.nd == 3);
    CHECK(ds.types[1] == MPI_CHAR);
    CHECK(size_of(ds.types[0]) == size_of(ix) && size_of(ds.types[2]) == size_of(hv));

    decoded di = decode(ds.types[0], MPI_COMBINER_INDEXED);
    int ii[5] = {2, 1, 3, 5, 0};
    expect_ints(&di, ii, 5, "indexed");
    CHECK(di.na == 0 && di.nd == 1);

    decoded dr = decode(di.types[0], MPI_COMBINER_RESIZED);
    MPI_Aint ra[2] = {-4, 64};
    expect_addrs(&dr, ra, 2, "resized");
    CHECK(dr.ni == 0 && dr.nd == 1);
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(di.types[0], &lb, &ext));
    CHECK(lb == -4 && ext == 64);

    decoded dv = decode(dr.types[0], MPI_COMBINER_VECTOR);
    int vi[3] = {3, 2, 4};
    expect_ints(&dv, vi, 3, "vector");
    CHECK(dv.nd == 1 && dv.types[0] == MPI_INT);
    CHECK(combiner_of(dv.types[0]) == MPI_COMBINER_NAMED);

    decoded dh = decode(ds.types[2], MPI_COMBINER_HVECTOR);
    int hi[2] = {2, 1};
    MPI_Aint ha[1] = {200};
    expect_ints(&dh, hi, 2, "hvector");
    expect_addrs(&dh, ha, 1, "hvector");
    CHECK(dh.types[0] == MPI_DOUBLE);

    /* every returned derived type is a handle of its own */
    release(dv.types[0]);
    release(dr.types[0]);
    release(di.types[0]);
    release(dh.types[0]);
    for (int i = 0; i < 3; i++)
        release(ds.types[i]);
    release(st2);
    MPI_Datatype all[6] = {v, r, ix, hv, st, d};
    for (int i = 0; i < 6; i++)
        MPI_OK(MPI_Type_free(&all[i]));
}

static void other_combiners(void)
{
    MPI_Datatype t;
    decoded x;

    MPI_OK(MPI_Type_contiguous(7, MPI_UNSIGNED, &t));
    x = decode(t, MPI_COMBINER_CONTIGUOUS);
    int ci[1] = {7};
    expect_ints(&x, ci, 1, "contiguous");
    CHECK(x.types[0] == MPI_UNSIGNED);
    MPI_OK(MPI_Type_free(&t));

    int ibd[3] = {0, 5, 9};
    MPI_OK(MPI_Type_create_indexed_block(3, 2, ibd, MPI_LONG, &t));
    x = decode(t, MPI_COMBINER_INDEXED_BLOCK);
    int ibi[5] = {3, 2, 0, 5, 9};
    expect_ints(&x, ibi, 5, "indexed_block");
    CHECK(x.types[0] == MPI_LONG);
    MPI_OK(MPI_Type_free(&t));

    MPI_Aint hbd[2] = {8, 100};
    MPI_OK(MPI_Type_create_hindexed_block(2, 3, hbd, MPI_BYTE, &t));
    x = decode(t, MPI_COMBINER_HINDEXED_BLOCK);
    int hbi[2] = {2, 3};
    expect_ints(&x, hbi, 2, "hindexed_block");
    expect_addrs(&x, hbd, 2, "hindexed_block");
    MPI_OK(MPI_Type_free(&t));

    int hxb[2] = {2, 1};
    MPI_Aint hxd[2] = {0, 40};
    MPI_OK(MPI_Type_create_hindexed(2, hxb, hxd, MPI_DOUBLE, &t));
    x = decode(t, MPI_COMBINER_HINDEXED);
    int hxi[3] = {2, 2, 1};
    expect_ints(&x, hxi, 3, "hindexed");
    expect_addrs(&x, hxd, 2, "hindexed");
    MPI_OK(MPI_Type_free(&t));

    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    MPI_OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_FLOAT, &t));
    x = decode(t, MPI_COMBINER_SUBARRAY);
    int sai[8] = {2, 4, 5, 2, 3, 1, 1, MPI_ORDER_FORTRAN};
    expect_ints(&x, sai, 8, "subarray");
    CHECK(x.types[0] == MPI_FLOAT);
    MPI_Aint lb, ext, tlb, text;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    MPI_OK(MPI_Type_get_true_extent(t, &tlb, &text));
    CHECK(size_of(t) == 24 && lb == 0 && ext == 80 && tlb == 20 && text == 40);
    MPI_OK(MPI_Type_free(&t));

    int gs[2] = {8, 6}, di[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        da[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, ps[2] = {2, 2};
    MPI_OK(MPI_Type_create_darray(4, 3, 2, gs, di, da, ps, MPI_ORDER_C, MPI_SHORT, &t));
    x = decode(t, MPI_COMBINER_DARRAY);
    int dai[12] = {4, 3, 2, 8, 6, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC,
                   MPI_DISTRIBUTE_DFLT_DARG, 2, 2, 2, MPI_ORDER_C};
    expect_ints(&x, dai, 12, "darray");
    CHECK(x.types[0] == MPI_SHORT);
    /* rank 3 = coordinates (1, 1): rows 4..7, columns {2, 3}: 8 shorts */
    CHECK(size_of(t) == 16);
    MPI_OK(MPI_Type_free(&t));

    /* a named type: NAMED and no contents */
    int ni = -1, na = -1, nd = -1, c = -1;
    MPI_OK(MPI_Type_get_envelope(MPI_DOUBLE, &ni, &na, &nd, &c));
    CHECK(ni == 0 && na == 0 && nd == 0 && c == MPI_COMBINER_NAMED);
}

/* Types made by the _c constructors report their arguments as large counts. */
static void large_counts(void)
{
    MPI_Datatype t;
    MPI_Count ni, na, nl, nd;
    int comb;
    int ints[8];
    MPI_Aint addrs[8];
    MPI_Count lc[8];
    MPI_Datatype types[8];

    MPI_OK(MPI_Type_vector_c(2, 3, 4, MPI_INT, &t));
    MPI_OK(MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 0 && na == 0 && nl == 3 && nd == 1);
    MPI_OK(MPI_Type_get_contents_c(t, ni, na, nl, nd, ints, addrs, lc, types));
    CHECK(lc[0] == 2 && lc[1] == 3 && lc[2] == 4 && types[0] == MPI_INT);
    CHECK(size_of(t) == 24);
    MPI_OK(MPI_Type_free(&t));

    MPI_Count bl[2] = {1, 2}, dp[2] = {0, 16};
    MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE};
    MPI_OK(MPI_Type_create_struct_c(2, bl, dp, ty, &t));
    MPI_OK(MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 0 && na == 0 && nl == 5 && nd == 2);
    MPI_OK(MPI_Type_get_contents_c(t, ni, na, nl, nd, ints, addrs, lc, types));
    CHECK(lc[0] == 2 && lc[1] == 1 && lc[2] == 2 && lc[3] == 0 && lc[4] == 16);
    CHECK(types[0] == MPI_INT && types[1] == MPI_DOUBLE);
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECK(lb == 0 && ext == 32);
    MPI_OK(MPI_Type_free(&t));

    MPI_OK(MPI_Type_create_resized_c(MPI_INT, -4, 16, &t));
    MPI_OK(MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_RESIZED && nl == 2 && nd == 1);
    MPI_OK(MPI_Type_get_contents_c(t, ni, na, nl, nd, ints, addrs, lc, types));
    CHECK(lc[0] == -4 && lc[1] == 16);
    MPI_Count clb, cext;
    MPI_OK(MPI_Type_get_extent_c(t, &clb, &cext));
    CHECK(clb == -4 && cext == 16);
    MPI_OK(MPI_Type_free(&t));

    /* the _c queries on a type of int arguments: no large counts */
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &t));
    MPI_OK(MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && ni == 1 && na == 0 && nl == 0 && nd == 1);
    MPI_OK(MPI_Type_get_contents_c(t, ni, na, nl, nd, ints, addrs, lc, types));
    CHECK(ints[0] == 3 && types[0] == MPI_INT);
    MPI_OK(MPI_Type_free(&t));
}

static void sizes(void)
{
    /* 2^34 bytes: too large for an int */
    MPI_Datatype a, b;
    MPI_OK(MPI_Type_contiguous(1 << 16, MPI_INT, &a));
    MPI_OK(MPI_Type_contiguous(1 << 16, a, &b));
    int s = 0;
    MPI_OK(MPI_Type_size(b, &s));
    CHECK(s == MPI_UNDEFINED);
    MPI_Count sc = 0, sx = 0;
    MPI_OK(MPI_Type_size_c(b, &sc));
    MPI_OK(MPI_Type_size_x(b, &sx));
    CHECK(sc == (MPI_Count)1 << 34 && sx == sc);
    MPI_Count lb, ext, tlb, text;
    MPI_OK(MPI_Type_get_extent_x(b, &lb, &ext));
    MPI_OK(MPI_Type_get_true_extent_x(b, &tlb, &text));
    CHECK(lb == 0 && ext == sc && tlb == 0 && text == sc);
    MPI_OK(MPI_Type_get_true_extent_c(b, &tlb, &text));
    CHECK(tlb == 0 && text == sc);
    MPI_OK(MPI_Type_free(&a));
    MPI_OK(MPI_Type_free(&b));

    /* bounds of the predefined types */
    MPI_Aint l, e;
    MPI_OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &l, &e));
    CHECK(l == 0 && e == 16);
    MPI_OK(MPI_Type_get_true_extent(MPI_DOUBLE_INT, &l, &e));
    CHECK(l == 0 && e == 12);
    CHECK(size_of(MPI_DOUBLE_INT) == 12 && size_of(MPI_SHORT) == (int)sizeof(short));
}

static void names(void)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    const struct {
        MPI_Datatype t;
        const char *n;
    } pre[] = {{MPI_INT, "MPI_INT"},       {MPI_DOUBLE, "MPI_DOUBLE"}, {MPI_CHAR, "MPI_CHAR"},
               {MPI_BYTE, "MPI_BYTE"},     {MPI_PACKED, "MPI_PACKED"}, {MPI_FLOAT_INT, "MPI_FLOAT_INT"},
               {MPI_UINT64_T, "MPI_UINT64_T"}};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        MPI_OK(MPI_Type_get_name(pre[i].t, name, &len));
        CHECKF(strcmp(name, pre[i].n) == 0 && len == (int)strlen(pre[i].n),
               "name of %s is \"%s\" (%d)", pre[i].n, name, len);
    }
    MPI_Datatype t;
    MPI_OK(MPI_Type_vector(2, 1, 3, MPI_INT, &t));
    MPI_OK(MPI_Type_get_name(t, name, &len));
    CHECK(len == 0 && name[0] == 0);
    MPI_OK(MPI_Type_set_name(t, "column of ints"));
    MPI_OK(MPI_Type_get_name(t, name, &len));
    CHECK(strcmp(name, "column of ints") == 0 && len == 14);
    MPI_OK(MPI_Type_set_name(t, "renamed"));
    MPI_OK(MPI_Type_get_name(t, name, &len));
    CHECK(strcmp(name, "renamed") == 0 && len == 7);
    MPI_OK(MPI_Type_free(&t));
    /* MPI-4.1: the null handle has its name (MPICH before 4.2 and Open MPI 4 refuse it) */
    if (is_madmpi()) {
        MPI_OK(MPI_Type_get_name(MPI_DATATYPE_NULL, name, &len));
        CHECKF(strcmp(name, "MPI_DATATYPE_NULL") == 0 && len == 17, "name: %s", name);
    }
}

static void f90_and_lookups(void)
{
    MPI_Datatype r1, r2, r8, c8, i2;
    MPI_OK(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r1));
    MPI_OK(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r2));
    CHECK(r1 == r2); /* the same predefined type */
    CHECK(size_of(r1) == 4);
    decoded x = decode(r1, MPI_COMBINER_F90_REAL);
    int ri[2] = {6, MPI_UNDEFINED};
    expect_ints(&x, ri, 2, "f90 real");
    MPI_OK(MPI_Type_create_f90_real(15, 300, &r8));
    CHECK(size_of(r8) == 8);
    MPI_OK(MPI_Type_create_f90_complex(6, MPI_UNDEFINED, &c8));
    CHECK(size_of(c8) == 8 && combiner_of(c8) == MPI_COMBINER_F90_COMPLEX);
    MPI_OK(MPI_Type_create_f90_integer(4, &i2));
    CHECK(size_of(i2) == 2 && combiner_of(i2) == MPI_COMBINER_F90_INTEGER);
    /* inside a derived type, the f90 type decodes to its own handle */
    MPI_Datatype c;
    MPI_OK(MPI_Type_contiguous(2, r1, &c));
    x = decode(c, MPI_COMBINER_CONTIGUOUS);
    CHECK(x.types[0] == r1);
    MPI_OK(MPI_Type_free(&c));

    MPI_Datatype m;
    MPI_OK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &m));
    CHECK(size_of(m) == 8 && combiner_of(m) == MPI_COMBINER_NAMED);
    MPI_OK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &m));
    CHECK(size_of(m) == 4 && combiner_of(m) == MPI_COMBINER_NAMED);
    MPI_OK(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &m));
    CHECK(size_of(m) == 16 && combiner_of(m) == MPI_COMBINER_NAMED);

#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    MPI_Datatype p;
    MPI_OK(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &p));
    CHECK(p == MPI_DOUBLE_INT);
    MPI_OK(MPI_Type_get_value_index(MPI_FLOAT, MPI_INT, &p));
    CHECK(p == MPI_FLOAT_INT);
    /* Pairs with no predefined pair type: MPI_DATATYPE_NULL, as in MPICH and Open MPI
     * (among them integer/floating values with integer indices other than MPI_INT). */
    const MPI_Datatype undefined[][2] = {
        {MPI_FLOAT, MPI_CHAR},  {MPI_FLOAT, MPI_FLOAT},        {MPI_CHAR, MPI_LONG},
        {MPI_BYTE, MPI_INT},    {MPI_INT, MPI_DOUBLE},         {MPI_DOUBLE_COMPLEX, MPI_INT},
        {MPI_SHORT, MPI_LONG},  {MPI_SIGNED_CHAR, MPI_LONG},   {MPI_DOUBLE, MPI_LONG},
        {MPI_REAL, MPI_INTEGER}};
    for (size_t k = 0; k < sizeof undefined / sizeof undefined[0]; k++) {
        p = MPI_INT;
        MPI_OK(MPI_Type_get_value_index(undefined[k][0], undefined[k][1], &p));
        CHECKF(p == MPI_DATATYPE_NULL, "value-index pair %zu is not MPI_DATATYPE_NULL", k);
    }
    MPI_OK(MPI_Type_get_value_index(MPI_REAL, MPI_REAL, &p));
    CHECK(p == MPI_2REAL);
    MPI_OK(MPI_Type_get_value_index(MPI_INTEGER, MPI_INTEGER, &p));
    CHECK(p == MPI_2INTEGER);
#endif
}

/* A dup of a committed type is committed: usable at once (to itself). */
static void dup_committed(void)
{
    MPI_Datatype t, d;
    MPI_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &t));
    MPI_OK(MPI_Type_commit(&t));
    MPI_OK(MPI_Type_dup(t, &d));
    MPI_OK(MPI_Type_free(&t));
    int s[5] = {1, 2, 3, 4, 5}, r[5] = {0, 0, 0, 0, 0};
    MPI_OK(MPI_Sendrecv(s, 1, d, t_rank, 0, r, 1, d, t_rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(r[0] == 1 && r[1] == 0 && r[2] == 3 && r[3] == 0 && r[4] == 5);
    MPI_OK(MPI_Type_free(&d));
}

/* Attributes follow MPI_Type_dup (copy callback) and MPI_Type_free (delete callback). */
static int deleted = 0;

static int count_delete(MPI_Datatype t, int keyval, void *val, void *extra)
{
    (void)t;
    (void)keyval;
    (void)extra;
    deleted += *(int *)val;
    return MPI_SUCCESS;
}

static void attributes(void)
{
    int key, one = 1, *got = NULL, flag = 0;
    MPI_OK(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_delete, &key, NULL));
    MPI_Datatype t, d;
    MPI_OK(MPI_Type_contiguous(2, MPI_INT, &t));
    MPI_OK(MPI_Type_set_attr(t, key, &one));
    MPI_OK(MPI_Type_dup(t, &d));
    MPI_OK(MPI_Type_get_attr(d, key, &got, &flag));
    CHECK(flag && got == &one);
    MPI_OK(MPI_Type_free(&t));
    /* at once in madmpi; MPICH 4.0 waits until the dup is gone too */
    CHECK(deleted == 1 || !is_madmpi());
    MPI_OK(MPI_Type_free(&d));
    CHECK(deleted == 2);
    MPI_OK(MPI_Type_free_keyval(&key));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    nested();
    other_combiners();
    large_counts();
    sizes();
    names();
    f90_and_lookups();
    dup_committed();
    attributes();
    t_done("decode");
    return 0;
}
