/* comm.c - communicator management, groups, attribute caching and info
 * objects: dup / idup (several in flight, and a blocking dup while an idup is
 * pending), split, split_type, create, create_group, compare, names,
 * context isolation, many communicators created and freed; every group
 * operation; keyvals with copy and delete callbacks run on dup and free
 * (and the predefined MPI_COMM_DUP_FN / MPI_COMM_NULL_COPY_FN), the
 * deprecated MPI-1 forms, datatype attributes; info objects and
 * communicator hints.
 */
#include "coll.h"

static int copies, deletes;

static int copy_cb(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)old;
    (void)key;
    CHECK(*(int *)extra == 42);
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    copies++;
    return MPI_SUCCESS;
}

static int delete_cb(MPI_Comm c, int key, void *val, void *extra)
{
    (void)c;
    (void)key;
    (void)val;
    CHECK(*(int *)extra == 42);
    deletes++;
    return MPI_SUCCESS;
}

/* A copy callback that fails: the dup fails with its code. */
static int copy_fails(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)old;
    (void)key;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static int type_deletes;

static int type_delete_cb(MPI_Datatype t, int key, void *val, void *extra)
{
    (void)t;
    (void)key;
    (void)val;
    (void)extra;
    type_deletes++;
    return MPI_SUCCESS;
}

static void ranks_of(MPI_Comm c, int *out)
{
    MPI_Group g, w;
    int n;
    MPI_OK(MPI_Comm_group(c, &g));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &w));
    MPI_OK(MPI_Group_size(g, &n));
    int *idx = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        idx[i] = i;
    MPI_OK(MPI_Group_translate_ranks(g, n, idx, w, out));
    free(idx);
    MPI_OK(MPI_Group_free(&g));
    MPI_OK(MPI_Group_free(&w));
}

static void test_dup_split(void)
{
    int n = t_size, me = t_rank, res, sz, rk;
    MPI_Comm d, s, r;

    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_OK(MPI_Comm_size(d, &sz));
    MPI_OK(MPI_Comm_rank(d, &rk));
    CHECK(sz == n && rk == me);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, d, &res));
    CHECK(res == MPI_CONGRUENT);
    MPI_OK(MPI_Comm_compare(d, d, &res));
    CHECK(res == MPI_IDENT);

    /* Context isolation: a message on the duplicate is invisible on WORLD. */
    if (n > 1) {
        int v = me;
        if (me == 0)
            MPI_OK(MPI_Send(&v, 1, MPI_INT, 1, 5, d));
        if (me == 1) {
            int flag = 1;
            MPI_Status st;
            MPI_OK(MPI_Probe(0, 5, d, &st));
            MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            CHECK(!flag);
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, 0, 5, d, &st));
            CHECK(v == 0);
        }
    }

    /* split: colors me % 3, ranks reversed */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, me % 3, n - me, &s));
    MPI_OK(MPI_Comm_size(s, &sz));
    MPI_OK(MPI_Comm_rank(s, &rk));
    int expect = 0, before = 0;
    for (int q = 0; q < n; q++)
        if (q % 3 == me % 3) {
            expect++;
            if (q > me)
                before++;
        }
    CHECK(sz == expect && rk == before);
    int *w = xmalloc(sizeof(int) * (size_t)sz);
    ranks_of(s, w);
    for (int i = 1; i < sz; i++)
        CHECK(w[i - 1] > w[i] && w[i] % 3 == me % 3);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, s, &res));
    CHECK(res == (n == 1 ? MPI_CONGRUENT : MPI_UNEQUAL));
    free(w);

    /* split with MPI_UNDEFINED */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, me == 0 ? MPI_UNDEFINED : 1, 0, &r));
    if (me == 0)
        CHECK(r == MPI_COMM_NULL);
    else {
        MPI_OK(MPI_Comm_size(r, &sz));
        CHECK(sz == n - 1);
        MPI_OK(MPI_Comm_free(&r));
    }

    /* same members, other order: similar */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, n - me, &r));
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, r, &res));
    CHECK(res == (n == 1 ? MPI_CONGRUENT : MPI_SIMILAR));
    MPI_OK(MPI_Comm_free(&r));

    /* split_type: the processes of this host */
    char name[MPI_MAX_PROCESSOR_NAME], *all = xmalloc((size_t)MPI_MAX_PROCESSOR_NAME * (size_t)n);
    int len;
    memset(name, 0, sizeof name);
    MPI_OK(MPI_Get_processor_name(name, &len));
    MPI_OK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    int same = 0;
    for (int q = 0; q < n; q++)
        same += strcmp(all + q * MPI_MAX_PROCESSOR_NAME, name) == 0;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &r));
    MPI_OK(MPI_Comm_size(r, &sz));
    CHECKF(sz == same, "shared split of size %d, %d on this host", sz, same);
    MPI_OK(MPI_Comm_free(&r));
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, me, MPI_INFO_NULL, &r));
    CHECK(r == MPI_COMM_NULL);
    free(all);

    MPI_OK(MPI_Comm_free(&s));
    MPI_OK(MPI_Comm_free(&d));
    CHECK(d == MPI_COMM_NULL);
}

static void test_idup(void)
{
    int n = t_size, me = t_rank;
    MPI_Comm a, b, c;
    MPI_Request rq[2];
    MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &a, &rq[0]));
    MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &b, &rq[1]));
    /* a blocking creation while two are pending */
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPI_Status sts[2];
    MPI_OK(MPI_Waitall(2, rq, sts));
    int x = me, y = -1;
    MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, a));
    CHECK(y == n * (n - 1) / 2);
    MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, b));
    CHECK(y == n - 1);
    MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MIN, c));
    CHECK(y == 0);
    /* the three are distinct contexts */
    if (n > 1) {
        int v[3] = {1, 2, 3}, got = 0;
        if (me == 0) {
            MPI_OK(MPI_Send(&v[0], 1, MPI_INT, 1, 0, a));
            MPI_OK(MPI_Send(&v[1], 1, MPI_INT, 1, 0, b));
            MPI_OK(MPI_Send(&v[2], 1, MPI_INT, 1, 0, c));
        } else if (me == 1) {
            MPI_OK(MPI_Recv(&got, 1, MPI_INT, 0, 0, c, MPI_STATUS_IGNORE));
            CHECK(got == 3);
            MPI_OK(MPI_Recv(&got, 1, MPI_INT, 0, 0, b, MPI_STATUS_IGNORE));
            CHECK(got == 2);
            MPI_OK(MPI_Recv(&got, 1, MPI_INT, 0, 0, a, MPI_STATUS_IGNORE));
            CHECK(got == 1);
        }
    }
    MPI_OK(MPI_Comm_free(&a));
    MPI_OK(MPI_Comm_free(&b));
    MPI_OK(MPI_Comm_free(&c));
}

/* Two MPI_Comm_idup on different communicators, started in opposite orders on two
 * processes (MPICH's comm/comm_idup_overlap): both complete. The second communicator's
 * context agreement found the first one holding every free id and reported them out. */
static void test_idup_crossed(void)
{
    int me = t_rank;
    MPI_Comm pair, other, d[2];
    MPI_Request rq[2];
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, me < 2 ? 0 : MPI_UNDEFINED, me, &pair));
    if (pair == MPI_COMM_NULL)
        return;
    MPI_OK(MPI_Comm_dup(pair, &other));
    MPI_Comm first = me == 0 ? pair : other, second = me == 0 ? other : pair;
    for (int round = 0; round < 20; round++) {
        MPI_OK(MPI_Comm_idup(first, &d[0], &rq[0]));
        MPI_OK(MPI_Comm_idup(second, &d[1], &rq[1]));
        MPI_Status sts[2];
        MPI_OK(MPI_Waitall(2, rq, sts));
        /* the duplicate of `pair` first, then that of `other`, on both */
        for (int j = 0; j < 2; j++) {
            int k = me == 0 ? j : 1 - j, x = 1, y = 0;
            MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, d[k]));
            CHECKF(y == (t_size < 2 ? 1 : 2), "sum %d on the idup'ed communicator", y);
            MPI_OK(MPI_Comm_free(&d[k]));
        }
    }
    MPI_OK(MPI_Comm_free(&other));
    MPI_OK(MPI_Comm_free(&pair));
}

static void test_create(void)
{
    int n = t_size, me = t_rank, sz, rk;
    MPI_Group w, even, ends;
    MPI_Comm c;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &w));
    int range[1][3] = {{0, n - 1, 2}};
    MPI_OK(MPI_Group_range_incl(w, 1, range, &even));
    MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, even, &c));
    if (me % 2 == 0) {
        MPI_OK(MPI_Comm_size(c, &sz));
        MPI_OK(MPI_Comm_rank(c, &rk));
        CHECK(sz == (n + 1) / 2 && rk == me / 2);
        int x = 1, y = 0;
        MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c));
        CHECK(y == sz);
        MPI_OK(MPI_Comm_free(&c));
    } else {
        CHECK(c == MPI_COMM_NULL);
    }
    /* create_group: only the members call */
    int endr[2] = {n - 1, 0};
    MPI_OK(MPI_Group_incl(w, n > 1 ? 2 : 1, endr, &ends));
    if (me == 0 || me == n - 1) {
        MPI_OK(MPI_Comm_create_group(MPI_COMM_WORLD, ends, 9, &c));
        MPI_OK(MPI_Comm_rank(c, &rk));
        CHECK(rk == (me == n - 1 ? 0 : 1));
        int x = me, y = -1;
        MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, c));
        CHECK(y == n - 1);
        MPI_OK(MPI_Comm_free(&c));
    }
    MPI_OK(MPI_Group_free(&w));
    MPI_OK(MPI_Group_free(&even));
    MPI_OK(MPI_Group_free(&ends));
}

static void test_groups(void)
{
    int n = t_size, me = t_rank, sz, rk, res;
    MPI_Group w, a, b, u, x, d, e;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &w));
    MPI_OK(MPI_Group_size(w, &sz));
    MPI_OK(MPI_Group_rank(w, &rk));
    CHECK(sz == n && rk == me);
    /* a = first half, b = ranks >= n/2 reversed */
    int *ra = xmalloc(sizeof(int) * (size_t)n), *rb = xmalloc(sizeof(int) * (size_t)n);
    int na = (n + 1) / 2, nb = 0;
    for (int i = 0; i < na; i++)
        ra[i] = i;
    for (int i = n - 1; i >= n / 2; i--)
        rb[nb++] = i;
    MPI_OK(MPI_Group_incl(w, na, ra, &a));
    MPI_OK(MPI_Group_incl(w, nb, rb, &b));
    MPI_OK(MPI_Group_rank(a, &rk));
    CHECK(rk == (me < na ? me : MPI_UNDEFINED));
    MPI_OK(MPI_Group_union(a, b, &u));
    MPI_OK(MPI_Group_size(u, &sz));
    CHECK(sz == n);
    MPI_OK(MPI_Group_compare(u, w, &res));
    CHECK(res == (n - na <= 1 ? MPI_IDENT : MPI_SIMILAR));
    MPI_OK(MPI_Group_intersection(a, b, &x));
    MPI_OK(MPI_Group_size(x, &sz));
    CHECK(sz == na + nb - n);
    MPI_OK(MPI_Group_difference(w, a, &d));
    MPI_OK(MPI_Group_size(d, &sz));
    CHECK(sz == n - na);
    /* translate: rank i of b is world rank n-1-i */
    int *out = xmalloc(sizeof(int) * (size_t)n), *idx = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < nb; i++)
        idx[i] = i;
    MPI_OK(MPI_Group_translate_ranks(b, nb, idx, w, out));
    for (int i = 0; i < nb; i++)
        CHECK(out[i] == n - 1 - i);
    idx[0] = MPI_PROC_NULL;
    MPI_OK(MPI_Group_translate_ranks(w, 1, idx, a, out));
    CHECK(out[0] == MPI_PROC_NULL);
    if (n > 1) {
        idx[0] = n - 1;
        MPI_OK(MPI_Group_translate_ranks(w, 1, idx, a, out));
        CHECK(out[0] == (n - 1 < na ? n - 1 : MPI_UNDEFINED));
    }
    /* excl, range_excl, empty results */
    MPI_OK(MPI_Group_excl(w, na, ra, &e));
    MPI_OK(MPI_Group_compare(e, d, &res));
    CHECK(res == MPI_IDENT);
    MPI_OK(MPI_Group_free(&e));
    int range[1][3] = {{n - 1, 0, -1}};
    MPI_OK(MPI_Group_range_excl(w, 1, range, &e));
    CHECK(e == MPI_GROUP_EMPTY);
    MPI_OK(MPI_Group_size(e, &sz));
    CHECK(sz == 0);
    MPI_OK(MPI_Group_free(&e));
    MPI_OK(MPI_Group_range_incl(w, 1, range, &e));
    MPI_OK(MPI_Group_size(e, &sz));
    CHECK(sz == n);
    MPI_OK(MPI_Group_rank(e, &rk));
    CHECK(rk == n - 1 - me);
    MPI_OK(MPI_Group_compare(e, w, &res));
    CHECK(res == (n == 1 ? MPI_IDENT : MPI_SIMILAR));
    MPI_OK(MPI_Group_compare(a, MPI_GROUP_EMPTY, &res));
    CHECK(res == MPI_UNEQUAL);
    MPI_OK(MPI_Group_free(&e));
    if (is_madmpi()) {
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        if (n > 1) {
            int dupl[2] = {0, 0};
            EXPECT_CLASS(MPI_Group_incl(w, 2, dupl, &e), MPI_ERR_RANK);
        }
        int bad = n;
        EXPECT_CLASS(MPI_Group_incl(w, 1, &bad, &e), MPI_ERR_RANK);
        EXPECT_CLASS(MPI_Group_size(MPI_GROUP_NULL, &sz), MPI_ERR_GROUP);
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    }
    MPI_Group *all[] = {&w, &a, &b, &u, &x, &d};
    for (int i = 0; i < 6; i++) {
        MPI_OK(MPI_Group_free(all[i]));
        CHECK(*all[i] == MPI_GROUP_NULL);
    }
    free(ra);
    free(rb);
    free(out);
    free(idx);
}

static void test_attrs(void)
{
    static int extra = 42;
    int k1, k2, k3, flag;
    void *v;
    MPI_Comm d, d2;
    MPI_OK(MPI_Comm_create_keyval(copy_cb, delete_cb, &k1, &extra));
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k2, NULL));
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, delete_cb, &k3, &extra));
    MPI_OK(MPI_Comm_set_attr(MPI_COMM_WORLD, k1, (void *)(intptr_t)100));
    MPI_OK(MPI_Comm_set_attr(MPI_COMM_WORLD, k2, (void *)(intptr_t)200));
    MPI_OK(MPI_Comm_set_attr(MPI_COMM_WORLD, k3, (void *)(intptr_t)300));
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, k1, &v, &flag));
    CHECK(flag && (intptr_t)v == 100);

    copies = deletes = 0;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    CHECK(copies == 1);
    MPI_OK(MPI_Comm_get_attr(d, k1, &v, &flag));
    CHECK(flag && (intptr_t)v == 101);
    MPI_OK(MPI_Comm_get_attr(d, k2, &v, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Comm_get_attr(d, k3, &v, &flag));
    CHECK(flag && (intptr_t)v == 300);
    /* replacing an attribute deletes the old value */
    MPI_OK(MPI_Comm_set_attr(d, k1, (void *)(intptr_t)7));
    CHECK(deletes == 1);
    /* idup copies too */
    MPI_Request rq;
    MPI_OK(MPI_Comm_idup(d, &d2, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(copies == 2);
    MPI_OK(MPI_Comm_get_attr(d2, k1, &v, &flag));
    CHECK(flag && (intptr_t)v == 8);
    /* delete_attr, then free: callbacks for what is left */
    MPI_OK(MPI_Comm_delete_attr(d, k1));
    CHECK(deletes == 2);
    MPI_OK(MPI_Comm_get_attr(d, k1, &v, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Comm_free(&d)); /* k3 */
    CHECK(deletes == 3);
    /* a freed keyval lives on while attributes use it */
    MPI_OK(MPI_Comm_free_keyval(&k1));
    CHECK(k1 == MPI_KEYVAL_INVALID);
    MPI_OK(MPI_Comm_free(&d2)); /* k1 (freed keyval) and k3 */
    CHECK(deletes == 5);
    MPI_OK(MPI_Comm_free_keyval(&k2));
    MPI_OK(MPI_Comm_free_keyval(&k3));

    /* no process of a job mpirun started has a parent */
    MPI_Comm parent = MPI_COMM_WORLD;
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL);

    /* a copy callback's error fails the dup, which leaves MPI_COMM_NULL */
    int kf;
    MPI_OK(MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &kf, NULL));
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_OK(MPI_Comm_set_attr(d, kf, (void *)(intptr_t)1));
    MPI_OK(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
    d2 = MPI_COMM_SELF;
    int rc = MPI_Comm_dup(d, &d2);
    CHECKF(err_class(rc) == MPI_ERR_OTHER, "rc %d", rc);
    CHECK(d2 == MPI_COMM_NULL);
    MPI_OK(MPI_Comm_free(&d));
    MPI_OK(MPI_Comm_free_keyval(&kf));

    /* predefined attribute */
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *(int *)v >= 32767);

    /* deprecated MPI-1 forms */
    int k4;
    MPI_OK(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &k4, NULL));
    MPI_OK(MPI_Attr_put(MPI_COMM_SELF, k4, (void *)(intptr_t)5));
    MPI_OK(MPI_Attr_get(MPI_COMM_SELF, k4, &v, &flag));
    CHECK(flag && (intptr_t)v == 5);
    MPI_OK(MPI_Attr_delete(MPI_COMM_SELF, k4));
    MPI_OK(MPI_Attr_get(MPI_COMM_SELF, k4, &v, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Keyval_free(&k4));

    /* datatype attributes */
    int tk;
    MPI_Datatype t;
    type_deletes = 0;
    MPI_OK(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_delete_cb, &tk, NULL));
    MPI_OK(MPI_Type_contiguous(2, MPI_INT, &t));
    MPI_OK(MPI_Type_set_attr(t, tk, (void *)(intptr_t)9));
    MPI_OK(MPI_Type_get_attr(t, tk, &v, &flag));
    CHECK(flag && (intptr_t)v == 9);
    MPI_OK(MPI_Type_set_attr(MPI_INT, tk, (void *)(intptr_t)10));
    MPI_OK(MPI_Type_get_attr(MPI_INT, tk, &v, &flag));
    CHECK(flag && (intptr_t)v == 10);
    MPI_OK(MPI_Type_delete_attr(MPI_INT, tk));
    MPI_OK(MPI_Type_delete_attr(t, tk));
    CHECK(type_deletes == 2);
    MPI_OK(MPI_Type_get_attr(t, tk, &v, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Type_free(&t));
    MPI_OK(MPI_Type_free_keyval(&tk));

    if (is_madmpi()) {
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        EXPECT_CLASS(MPI_Comm_set_attr(MPI_COMM_WORLD, 123456, NULL), MPI_ERR_KEYVAL);
        EXPECT_CLASS(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, NULL), MPI_ERR_KEYVAL);
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
}

static void test_names_info(void)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len, flag, nk;
    MPI_OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
    /* MPI-4.1: the null handle has its name (MPICH before 4.2 and Open MPI 4 refuse it) */
    if (is_madmpi()) {
        MPI_OK(MPI_Comm_get_name(MPI_COMM_NULL, name, &len));
        CHECKF(strcmp(name, "MPI_COMM_NULL") == 0 && len == 13, "name of MPI_COMM_NULL: %s", name);
    }
    MPI_Comm d;
    MPI_OK(MPI_Comm_dup(MPI_COMM_SELF, &d));
    MPI_OK(MPI_Comm_set_name(d, "my communicator"));
    MPI_OK(MPI_Comm_get_name(d, name, &len));
    CHECK(strcmp(name, "my communicator") == 0 && len == 15);
    int inter = -1;
    MPI_OK(MPI_Comm_test_inter(d, &inter));
    CHECK(inter == 0);

    MPI_Info info, info2, used;
    char val[64];
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "alpha", "one"));
    MPI_OK(MPI_Info_set(info, "beta", "twotwo"));
    MPI_OK(MPI_Info_set(info, "alpha", "uno"));
    MPI_OK(MPI_Info_get_nkeys(info, &nk));
    CHECK(nk == 2);
    MPI_OK(MPI_Info_get_nthkey(info, 1, name));
    CHECK(strcmp(name, "beta") == 0);
    MPI_OK(MPI_Info_get(info, "alpha", 63, val, &flag));
    CHECK(flag && strcmp(val, "uno") == 0);
    MPI_OK(MPI_Info_get(info, "gamma", 63, val, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Info_get_valuelen(info, "beta", &len, &flag));
    CHECK(flag && len == 6);
    int bl = 4;
    MPI_OK(MPI_Info_get_string(info, "beta", &bl, val, &flag));
    CHECK(flag && bl == 7 && strcmp(val, "two") == 0);
    MPI_OK(MPI_Info_dup(info, &info2));
    MPI_OK(MPI_Info_delete(info, "alpha"));
    MPI_OK(MPI_Info_get_nkeys(info, &nk));
    CHECK(nk == 1);
    MPI_OK(MPI_Info_get_nkeys(info2, &nk));
    CHECK(nk == 2);
    /* hints on communicators */
    MPI_OK(MPI_Comm_set_info(d, info2));
    MPI_OK(MPI_Comm_get_info(d, &used));
    MPI_OK(MPI_Info_get(used, "beta", 63, val, &flag));
    CHECK(!flag || strcmp(val, "twotwo") == 0);
    MPI_OK(MPI_Info_free(&used));
    /* MPI-4.0: no hint passes to another communicator, not even by a plain dup; the
     * _with_info forms set the hints given */
    MPI_Comm d2;
    MPI_OK(MPI_Comm_dup(d, &d2));
    MPI_OK(MPI_Comm_get_info(d2, &used));
    MPI_OK(MPI_Info_get(used, "beta", 63, val, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Info_free(&used));
    MPI_OK(MPI_Comm_free(&d2));
    MPI_Request rq;
    MPI_OK(MPI_Comm_idup(d, &d2, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Comm_get_info(d2, &used));
    MPI_OK(MPI_Info_get(used, "beta", 63, val, &flag));
    CHECK(!flag);
    MPI_OK(MPI_Info_free(&used));
    MPI_OK(MPI_Comm_free(&d2));
    MPI_OK(MPI_Comm_dup_with_info(d, info, &d2));
    MPI_OK(MPI_Comm_get_info(d2, &used));
    MPI_OK(MPI_Info_get(used, "beta", 63, val, &flag));
    CHECK(!flag || strcmp(val, "twotwo") == 0);
    MPI_OK(MPI_Info_free(&used));
    MPI_OK(MPI_Comm_free(&d2));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Info_free(&info2));
    CHECK(info == MPI_INFO_NULL);
    /* the start-up environment */
    MPI_OK(MPI_Info_get_nkeys(MPI_INFO_ENV, &nk));
    MPI_Info env;
    MPI_OK(MPI_Info_create_env(0, NULL, &env));
    MPI_OK(MPI_Info_free(&env));
    if (is_madmpi()) {
        CHECK(nk > 0);
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        MPI_OK(MPI_Info_create(&info));
        EXPECT_CLASS(MPI_Info_delete(info, "nothing"), MPI_ERR_INFO_NOKEY);
        EXPECT_CLASS(MPI_Info_set(info, "", "x"), MPI_ERR_INFO_KEY);
        int dummy;
        EXPECT_CLASS(MPI_Info_get_nthkey(info, 0, name), MPI_ERR_ARG);
        EXPECT_CLASS(MPI_Info_get_nkeys(MPI_INFO_NULL, &dummy), MPI_ERR_INFO);
        MPI_OK(MPI_Info_free(&info));
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        MPI_Comm w = MPI_COMM_WORLD;
        EXPECT_CLASS(MPI_Comm_free(&w), MPI_ERR_COMM);
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
    MPI_OK(MPI_Comm_free(&d));
}

/* Many communicators: context ids are recycled and never collide. */
static void test_many(void)
{
    enum { HOLD = 40, ROUNDS = 150 };
    MPI_Comm held[HOLD];
    for (int i = 0; i < HOLD; i++)
        MPI_OK(MPI_Comm_dup(i % 2 ? MPI_COMM_WORLD : MPI_COMM_SELF, &held[i]));
    for (int i = 0; i < ROUNDS; i++) {
        MPI_Comm c;
        MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_rank, &c));
        int x = 1, y = 0;
        MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c));
        CHECK(y == (t_size + 1 - t_rank % 2) / 2);
        MPI_OK(MPI_Comm_free(&c));
    }
    for (int i = 0; i < HOLD; i++) {
        int x = 1, y = 0;
        MPI_OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, held[i]));
        CHECK(y == (i % 2 ? t_size : 1));
        MPI_OK(MPI_Comm_free(&held[i]));
    }
}

/* Running out of context ids is an error (madmpi: 4096 per process), not a
 * hang; freeing communicators makes ids available again. */
static void test_exhaustion(void)
{
    if (!is_madmpi())
        return;
    enum { MAX = 5000 };
    MPI_Comm *c = xmalloc(sizeof(MPI_Comm) * MAX);
    int n = 0, rc = MPI_SUCCESS;
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    while (n < MAX && (rc = MPI_Comm_dup(MPI_COMM_SELF, &c[n])) == MPI_SUCCESS)
        n++;
    CHECKF(n < MAX && err_class(rc) == MPI_ERR_OTHER, "%d duplicates, rc %d", n, rc);
    CHECK(c[n] == MPI_COMM_NULL);
    for (int i = 0; i < n; i++)
        MPI_OK(MPI_Comm_free(&c[i]));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    MPI_Comm d;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_OK(MPI_Barrier(d));
    MPI_OK(MPI_Comm_free(&d));
    free(c);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    test_exhaustion();
    test_dup_split();
    test_idup();
    test_idup_crossed();
    test_create();
    test_groups();
    test_attrs();
    test_names_info();
    test_many();
    t_done("comm");
    return 0;
}
