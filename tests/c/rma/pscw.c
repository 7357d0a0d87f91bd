/* pscw.c - generalized active target (post/start/complete/wait, Win_test)
 * with subgroups, dynamic windows (attach/detach, displacements that are
 * addresses), and the _c large-count forms. 2 or more ranks. */
#include "../p2p/common.h"

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    int buf[16];
    for (int i = 0; i < 16; i++)
        buf[i] = -1;
    MPI_Win win;
    MPI_OK(MPI_Win_create_c(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Group world, evens, odds;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int ne = (n + 1) / 2, no = n / 2, re[64], ro[64];
    for (int i = 0; i < ne; i++)
        re[i] = 2 * i;
    for (int i = 0; i < no; i++)
        ro[i] = 2 * i + 1;
    MPI_OK(MPI_Group_incl(world, ne, re, &evens));
    MPI_OK(MPI_Group_incl(world, no, ro, &odds));

    /* Odd ranks write into every even rank; evens expose to the odds only. */
    for (int round = 0; round < 3; round++) {
        if (me % 2 == 0) {
            if (no > 0) {
                MPI_OK(MPI_Win_post(odds, 0, win));
                if (round == 1) {
                    int flag = 0;
                    while (!flag)
                        MPI_OK(MPI_Win_test(win, &flag));
                } else {
                    MPI_OK(MPI_Win_wait(win));
                }
                for (int i = 0; i < no; i++)
                    CHECKF(buf[i] == 100 * round + 2 * i + 1, "round %d buf[%d] = %d", round, i,
                           buf[i]);
            }
        } else {
            MPI_OK(MPI_Win_start(evens, 0, win));
            int v = 100 * round + me;
            for (int t = 0; t < ne; t++)
                MPI_OK(MPI_Put_c(&v, 1, MPI_INT, 2 * t, me / 2, 1, MPI_INT, win));
            MPI_OK(MPI_Win_complete(win));
        }
    }
    /* Everyone exposes to everyone, accumulating into slot 15 of each. */
    for (int i = 0; i < 16; i++)
        buf[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_post(world, 0, win));
    MPI_OK(MPI_Win_start(world, 0, win));
    int one = 1;
    for (int t = 0; t < n; t++)
        MPI_OK(MPI_Accumulate_c(&one, 1, MPI_INT, t, 15, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_complete(win));
    MPI_OK(MPI_Win_wait(win));
    CHECKF(buf[15] == n, "slot 15 = %d", buf[15]);
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int rc = MPI_Win_wait(win), cls;
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);
    /* A passive-target epoch may not begin inside an access epoch of
     * MPI_Win_start: access epochs of one window are disjoint (MPICH's
     * errors/rma/win_sync_lock_at). */
    MPI_OK(MPI_Win_post(world, 0, win));
    MPI_OK(MPI_Win_start(world, 0, win));
    EXPECT_CLASS(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, (me + 1) % n, 0, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_lock_all(0, win), MPI_ERR_RMA_SYNC);
    MPI_OK(MPI_Get(&buf[14], 1, MPI_INT, (me + 1) % n, 15, 1, MPI_INT, win));
    MPI_OK(MPI_Win_complete(win));
    MPI_OK(MPI_Win_wait(win));
    CHECK(buf[14] == n);
    MPI_OK(MPI_Win_free(&win));

    /* Dynamic window: each rank attaches a buffer and publishes its address. */
    MPI_Win dw;
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dw));
    int *flavor, flag;
    MPI_OK(MPI_Win_get_attr(dw, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_DYNAMIC);
    double *region = calloc(32, sizeof(double));
    MPI_OK(MPI_Win_attach(dw, region, 32 * sizeof(double)));
    MPI_Aint mine, *addrs = malloc(n * sizeof(MPI_Aint));
    MPI_OK(MPI_Get_address(region, &mine));
    MPI_OK(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_OK(MPI_Win_lock_all(0, dw));
    double d[4] = {me, me + 0.5, me + 0.25, me + 0.125};
    MPI_OK(MPI_Put(d, 4, MPI_DOUBLE, right, addrs[right] + 8 * sizeof(double), 4, MPI_DOUBLE, dw));
    MPI_OK(MPI_Win_flush(right, dw));
    double back[4];
    MPI_OK(MPI_Get_c(back, 4, MPI_DOUBLE, right, addrs[right] + 8 * sizeof(double), 4,
                     MPI_DOUBLE, dw));
    MPI_OK(MPI_Win_flush(right, dw));
    for (int i = 0; i < 4; i++)
        CHECK(back[i] == d[i]);
    /* Outside the attached memory: MPI_ERR_RMA_RANGE, reported by the flush. */
    MPI_OK(MPI_Win_set_errhandler(dw, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Put(d, 1, MPI_DOUBLE, right, addrs[right] + 32 * sizeof(double), 1, MPI_DOUBLE, dw));
    rc = MPI_Win_flush(right, dw);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECKF(cls == MPI_ERR_RMA_RANGE, "class %d", cls);
    MPI_OK(MPI_Win_unlock_all(dw));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(region[8] == left && region[11] == left + 0.125);
    MPI_OK(MPI_Win_detach(dw, region));
    rc = MPI_Win_detach(dw, region);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_ATTACH);
    MPI_OK(MPI_Win_free(&dw));
    free(region);
    free(addrs);
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Group_free(&evens));
    MPI_OK(MPI_Group_free(&odds));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK pscw\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
