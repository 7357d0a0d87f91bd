/* fence.c - windows and active-target communication with MPI_Win_fence:
 * Win_create / Win_allocate, the predefined attributes, names, group, info,
 * Put / Get / Accumulate / Get_accumulate / Fetch_and_op / Compare_and_swap
 * with predefined and derived datatypes on origin and target, and the error
 * classes of wrong use (MPI_ERR_RMA_RANGE, MPI_ERR_RMA_SYNC, MPI_ERR_WIN).
 * Any number of ranks. */
#include "../p2p/common.h"

#define N 64

static int win_errs = 0;
static void on_win_error(MPI_Win *w, int *code, ...)
{
    (void)w;
    (void)code;
    win_errs++;
}

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    int right = (me + 1) % n, left = (me + n - 1) % n;

    /* ---- MPI_Win_create over a user buffer of ints */
    int *buf = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        buf[i] = -1;
    MPI_Win win;
    MPI_OK(MPI_Win_create(buf, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    void *base = NULL;
    MPI_Aint *size = NULL;
    int *du = NULL, *flavor = NULL, *model = NULL, flag = 0;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == buf);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag));
    CHECK(flag && *size == N * (MPI_Aint)sizeof(int));
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &du, &flag));
    CHECK(flag && *du == (int)sizeof(int));
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_CREATE);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED);
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    MPI_OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 0);
    MPI_OK(MPI_Win_set_name(win, "ints"));
    MPI_OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 4 && strcmp(name, "ints") == 0);
    MPI_Group g, wg;
    int cmp = -1;
    MPI_OK(MPI_Win_get_group(win, &g));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    MPI_OK(MPI_Group_compare(g, wg, &cmp));
    CHECK(cmp == MPI_IDENT);
    MPI_OK(MPI_Group_free(&g));
    MPI_OK(MPI_Group_free(&wg));
    MPI_Info info;
    MPI_OK(MPI_Win_get_info(win, &info));
    MPI_OK(MPI_Info_free(&info));

    /* Put my rank into slot me of my right neighbour; get the left one's slot 0. */
    MPI_OK(MPI_Win_fence(0, win));
    int v = 1000 + me;
    MPI_OK(MPI_Put(&v, 1, MPI_INT, right, me, 1, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECKF(buf[left] == 1000 + left, "buf[%d] = %d", left, buf[left]);
    int got = 0;
    buf[N - 1] = 7 * me;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Get(&got, 1, MPI_INT, left, N - 1, 1, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECKF(got == 7 * left, "got %d", got);

    /* Accumulate from every rank into rank 0, slot 1: sum of (r + 1). */
    buf[1] = 0;
    buf[2] = 0;
    MPI_OK(MPI_Win_fence(0, win));
    int one = me + 1;
    for (int k = 0; k < 10; k++)
        MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_MAX, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (me == 0) {
        CHECKF(buf[1] == 10 * n * (n + 1) / 2, "sum %d", buf[1]);
        CHECKF(buf[2] == n, "max %d", buf[2]);
    }

    /* Derived datatypes on both sides: a strided vector of the origin into a
     * different strided layout at the target (every 3rd int from slot 8). */
    int src[16];
    for (int i = 0; i < 16; i++)
        src[i] = 100 * me + i;
    MPI_Datatype ovec, tvec;
    MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &ovec)); /* src[0,2,4,6] */
    MPI_OK(MPI_Type_commit(&ovec));
    MPI_OK(MPI_Type_vector(4, 1, 3, MPI_INT, &tvec)); /* slots 8, 11, 14, 17 */
    MPI_OK(MPI_Type_commit(&tvec));
    for (int i = 8; i < 20; i++)
        buf[i] = -1;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(src, 1, ovec, right, 8, 1, tvec, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 4; i++)
        CHECKF(buf[8 + 3 * i] == 100 * left + 2 * i, "slot %d = %d", 8 + 3 * i, buf[8 + 3 * i]);
    CHECK(buf[9] == -1 && buf[10] == -1);
    /* ... and back with a get: target vector into a contiguous origin. */
    int back[4] = {0, 0, 0, 0};
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Get(back, 4, MPI_INT, left, 8, 1, tvec, win));
    MPI_OK(MPI_Win_fence(0, win));
    /* left's slots hold what left-of-left put there */
    int ll = (left + n - 1) % n;
    for (int i = 0; i < 4; i++)
        CHECKF(back[i] == 100 * ll + 2 * i, "back[%d] = %d", i, back[i]);
    /* Accumulate with derived types on both sides. */
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Accumulate(src, 1, ovec, right, 8, 1, tvec, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 4; i++)
        CHECKF(buf[8 + 3 * i] == 2 * (100 * left + 2 * i), "acc slot %d = %d", 8 + 3 * i,
               buf[8 + 3 * i]);
    MPI_OK(MPI_Type_free(&ovec));
    MPI_OK(MPI_Type_free(&tvec));

    /* A large put, cut into several chunks (4 MiB of doubles). */
    int big = 1 << 19;
    double *dbase = NULL;
    MPI_Win dw;
    MPI_OK(MPI_Win_allocate(big * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD,
                            &dbase, &dw));
    MPI_OK(MPI_Win_get_attr(dw, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_ALLOCATE);
    double *dsrc = malloc(big * sizeof(double));
    for (int i = 0; i < big; i++)
        dsrc[i] = me * 1e6 + i;
    MPI_OK(MPI_Win_fence(0, dw));
    MPI_OK(MPI_Put(dsrc, big, MPI_DOUBLE, right, 0, big, MPI_DOUBLE, dw));
    MPI_OK(MPI_Win_fence(0, dw));
    for (int i = 0; i < big; i++)
        if (dbase[i] != left * 1e6 + i)
            FAILF("big put: [%d] = %f", i, dbase[i]);
    MPI_OK(MPI_Win_fence(0, dw));
    MPI_OK(MPI_Accumulate(dsrc, big, MPI_DOUBLE, right, 0, big, MPI_DOUBLE, MPI_SUM, dw));
    MPI_OK(MPI_Get(dsrc, big, MPI_DOUBLE, right, 0, big, MPI_DOUBLE, dw)); /* reads before or after: not checked */
    MPI_OK(MPI_Win_fence(0, dw));
    for (int i = 0; i < big; i++)
        if (dbase[i] != 2 * (left * 1e6 + i))
            FAILF("big acc: [%d] = %f", i, dbase[i]);
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, dw));
    MPI_OK(MPI_Win_free(&dw));
    CHECK(dw == MPI_WIN_NULL);
    free(dsrc);

    /* Get_accumulate, Fetch_and_op, Compare_and_swap on rank 0's slot 3. */
    if (me == 0)
        buf[3] = 0;
    MPI_OK(MPI_Win_fence(0, win));
    int old = -5, inc = 1;
    MPI_OK(MPI_Fetch_and_op(&inc, &old, MPI_INT, 0, 3, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(old >= 0 && old < n);
    if (me == 0)
        CHECK(buf[3] == n);
    int res2[2] = {0, 0}, add2[2] = {1, 2};
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Get_accumulate(add2, 2, MPI_INT, res2, 2, MPI_INT, left, 4, 2, MPI_INT, MPI_REPLACE, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(buf[4] == 1 && buf[5] == 2);
    int noop = 0;
    MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_INT, res2, 2, MPI_INT, left, 4, 2, MPI_INT, MPI_NO_OP, win));
    MPI_OK(MPI_Fetch_and_op(NULL, &noop, MPI_INT, left, 4, MPI_NO_OP, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(res2[0] == 1 && res2[1] == 2 && noop == 1);
    /* CAS: only one rank wins slot 6 of rank 0. */
    if (me == 0)
        buf[6] = -1;
    MPI_OK(MPI_Win_fence(0, win));
    int mine = me, cmpv = -1, prev = -7;
    MPI_OK(MPI_Compare_and_swap(&mine, &cmpv, &prev, MPI_INT, 0, 6, win));
    MPI_OK(MPI_Win_fence(0, win));
    int won = prev == -1, winners = 0;
    MPI_OK(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(winners == 1);
    if (me == 0)
        CHECK(buf[6] >= 0 && buf[6] < n);
    /* MINLOC on a pair type, every predefined op on long. */
    struct { double v; int i; } pr = {(double)(me % 2), me}, *pt = (void *)&buf[20];
    if (me == 0) {
        pt->v = 5.0;
        pt->i = 99;
    }
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Accumulate(&pr, 1, MPI_DOUBLE_INT, 0, 20, 1, MPI_DOUBLE_INT, MPI_MINLOC, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (me == 0)
        CHECKF(pt->v == 0.0 && pt->i == 0, "minloc %f %d", pt->v, pt->i);

    /* ---- errors, returned through a window error handler */
    MPI_Errhandler eh;
    MPI_OK(MPI_Win_create_errhandler(on_win_error, &eh));
    MPI_OK(MPI_Win_set_errhandler(win, eh));
    MPI_OK(MPI_Errhandler_free(&eh));
    int rc, cls;
    rc = MPI_Put(&v, 1, MPI_INT, right, N, 1, MPI_INT, win); /* one past the end */
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECKF(cls == MPI_ERR_RMA_RANGE, "class %d", cls);
    rc = MPI_Put(&v, 2, MPI_INT, right, N - 1, 2, MPI_INT, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_RANGE);
    rc = MPI_Put(&v, 1, MPI_INT, right, -1, 1, MPI_INT, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_RANGE);
    rc = MPI_Put(&v, 1, MPI_INT, n, 0, 1, MPI_INT, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RANK);
    rc = MPI_Accumulate(&v, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_MINLOC, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_OP);
    rc = MPI_Win_unlock(right, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);
    rc = MPI_Win_complete(win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);
    rc = MPI_Win_lock(12345, right, 0, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_LOCKTYPE);
    CHECK(win_errs == 8);
    MPI_OK(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK(win_errs == 9);
    /* A fence followed by a lock opened no fence epoch (access epochs of one
     * window are disjoint): after the unlock no epoch is open (MPICH's
     * errors/rma/win_sync_lock_fence). */
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    MPI_OK(MPI_Get(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(right, win));
    rc = MPI_Get(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC && win_errs == 10);
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_OK(MPI_Win_unlock_all(win));
    /* No epoch after a NOSUCCEED fence. */
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    rc = MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);
    MPI_OK(MPI_Win_free(&win));
    /* A freed window. */
    MPI_Win stale = win;
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    rc = MPI_Win_fence(0, stale);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_WIN);
    free(buf);

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK fence\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
