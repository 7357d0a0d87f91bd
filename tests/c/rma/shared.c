/* shared.c - MPI_Win_allocate_shared and MPI_Win_shared_query: one segment
 * per window, the parts contiguous in rank order, loads and stores of the
 * neighbours' parts, and one-sided operations on the same window. Any number
 * of ranks on one node. */
#include "../p2p/common.h"

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    MPI_Comm node;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int nn;
    MPI_OK(MPI_Comm_size(node, &nn));
    CHECK(nn == n);
    /* Rank r owns r + 1 ints (rank-dependent sizes). */
    int *mine = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate_shared((me + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, node,
                                   &mine, &win));
    int *flavor, flag;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_SHARED);
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i <= me; i++)
        mine[i] = 1000 * me + i;
    MPI_OK(MPI_Win_sync(win));
    MPI_OK(MPI_Barrier(node));
    MPI_OK(MPI_Win_sync(win));
    int *first = NULL;
    for (int r = 0; r < n; r++) {
        MPI_Aint sz = -1;
        int du = -1;
        int *p = NULL;
        MPI_OK(MPI_Win_shared_query(win, r, &sz, &du, &p));
        CHECK(sz == (MPI_Aint)((r + 1) * sizeof(int)) && du == (int)sizeof(int));
        if (r == 0)
            first = p;
        /* contiguous: rank r starts after ranks 0..r-1 */
        CHECK(p == first + r * (r + 1) / 2);
        if (r == me)
            CHECK(p == mine);
        for (int i = 0; i <= r; i++)
            CHECKF(p[i] == 1000 * r + i, "rank %d [%d] = %d", r, i, p[i]);
    }
    MPI_Aint sz;
    int du, *p;
    MPI_OK(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &p));
    CHECK(p == first && sz == sizeof(int));
    /* Stores into the right neighbour's part, seen by it after sync + barrier. */
    int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_OK(MPI_Win_shared_query(win, right, &sz, &du, &p));
    MPI_OK(MPI_Barrier(node));
    p[0] = -me;
    MPI_OK(MPI_Win_sync(win));
    MPI_OK(MPI_Barrier(node));
    MPI_OK(MPI_Win_sync(win));
    CHECK(mine[0] == -left);
    MPI_OK(MPI_Barrier(node));
    /* A part of no bytes has no address. */
    MPI_OK(MPI_Win_shared_query(win, 0, &sz, &du, &p));
    CHECK(p != NULL);
    /* One-sided operations on the same window. */
    int one = 1;
    MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Barrier(node));
    if (me == 0)
        CHECKF(mine[0] == -(n - 1) + n, "slot 0 = %d", mine[0]);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Win_free(&win));
    /* A window of another flavor (MPI-4.1): only my own part has an address. */
    int buf[2];
    MPI_OK(MPI_Win_create(buf, sizeof buf, 1, MPI_INFO_NULL, node, &win));
    MPI_OK(MPI_Win_shared_query(win, me, &sz, &du, &p));
    CHECK(sz == sizeof buf && du == 1 && p == buf);
    if (n > 1) {
        MPI_OK(MPI_Win_shared_query(win, right, &sz, &du, &p));
        CHECK(sz == 0 && du == 1 && p == NULL);
    }
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int rc = MPI_Win_shared_query(win, n, &sz, &du, &p), cls;
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RANK);
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Comm_free(&node));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK shared\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
