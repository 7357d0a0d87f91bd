/* async.c - passive target progress without the target calling MPI. Rank 0
 * is the target: it makes no MPI call while the others, under locks, put,
 * get, accumulate, fetch-and-op and flush on its window; it first computes
 * (a busy loop), then spins on a volatile load of its own window memory until
 * every origin's last accumulate has arrived. Then the same with a shared
 * window (MPI_Win_allocate_shared), where the target spins on its part while
 * the origins accumulate and fetch-and-op into it. At least 2 ranks. */
#include "../p2p/common.h"

#define SLOTS 64
#define ROUNDS 50

/* Spin until *p == want, with no MPI call (at most ~100 s: a hang becomes a
 * failure). */
static void spin_until(volatile long *p, long want)
{
    double t0 = MPI_Wtime(); /* MPI_Wtime only reads the clock */
    while (*p != want) {
        __sync_synchronize();
        if (MPI_Wtime() - t0 > 100.0)
            FAILF("the origins never reached the target: %ld, want %ld", *p, want);
    }
    __sync_synchronize();
}

/* A computation of some hundred milliseconds that calls no MPI function. */
static double compute(void)
{
    volatile double x = 1.0;
    for (long i = 0; i < 30000000L; i++)
        x = x * 1.0000001 + 1e-9;
    return x;
}

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    if (n < 2) {
        if (me == 0)
            printf("OK async\n");
        MPI_OK(MPI_Finalize());
        return 0;
    }
    long *mem = NULL;
    MPI_Win win;
    /* slot 0: arrivals; 1: fetch-and-op counter; 2..: one block of 4 per origin */
    MPI_OK(MPI_Win_allocate(SLOTS * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                            &mem, &win));
    for (int i = 0; i < SLOTS; i++)
        mem[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    if (me == 0) {
        double x = compute();
        CHECK(x > 0);
        spin_until((volatile long *)&mem[0], (long)(n - 1));
        /* Every origin's data is here, written while this rank made no call. */
        CHECKF(mem[1] == (long)(n - 1) * ROUNDS, "counter %ld", mem[1]);
        for (int o = 1; o < n && 2 + 4 * o + 3 < SLOTS; o++) {
            long *b = &mem[2 + 4 * o];
            CHECKF(b[0] == 1000L * o + ROUNDS - 1 && b[1] == -o && b[2] == (long)ROUNDS * o &&
                       b[3] == 7,
                   "origin %d block %ld %ld %ld %ld", o, b[0], b[1], b[2], b[3]);
        }
    } else {
        long ticket, one = 1;
        int blk = 2 + 4 * me;
        int has_block = blk + 3 < SLOTS;
        for (int k = 0; k < ROUNDS; k++) {
            int type = k % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE;
            MPI_OK(MPI_Win_lock(type, 0, 0, win));
            MPI_OK(MPI_Fetch_and_op(&one, &ticket, MPI_LONG, 0, 1, MPI_SUM, win));
            MPI_OK(MPI_Win_flush(0, win));
            CHECKF(ticket >= 0 && ticket < (long)(n - 1) * ROUNDS, "ticket %ld", ticket);
            if (has_block) {
                long v[2] = {1000L * me + k, -me}, back[2] = {0, 0};
                MPI_OK(MPI_Put(v, 2, MPI_LONG, 0, blk, 2, MPI_LONG, win));
                MPI_OK(MPI_Win_flush(0, win));
                MPI_OK(MPI_Get(back, 2, MPI_LONG, 0, blk, 2, MPI_LONG, win));
                MPI_OK(MPI_Win_flush(0, win));
                CHECKF(back[0] == v[0] && back[1] == v[1], "got %ld %ld", back[0], back[1]);
                long add = me;
                MPI_OK(MPI_Accumulate(&add, 1, MPI_LONG, 0, blk + 2, 1, MPI_LONG, MPI_SUM, win));
                long seven = 7;
                MPI_OK(MPI_Accumulate(&seven, 1, MPI_LONG, 0, blk + 3, 1, MPI_LONG, MPI_REPLACE,
                                      win));
            }
            MPI_OK(MPI_Win_unlock(0, win));
        }
        /* Arrival: the target is spinning on this slot. */
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_free(&win));

    /* A shared window: the target spins on its own part while the origins
     * fetch-and-op and accumulate into it (lock_all + flush). */
    MPI_Comm node;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int nme, nn;
    MPI_OK(MPI_Comm_rank(node, &nme));
    MPI_OK(MPI_Comm_size(node, &nn));
    if (nn >= 2) {
        long *part = NULL;
        MPI_Win sw;
        MPI_OK(MPI_Win_allocate_shared((nme == 0 ? 4 : 0) * sizeof(long), sizeof(long),
                                       MPI_INFO_NULL, node, &part, &sw));
        if (nme == 0)
            part[0] = part[1] = part[2] = part[3] = 0;
        MPI_OK(MPI_Barrier(node));
        if (nme == 0) {
            spin_until((volatile long *)&part[0], (long)(nn - 1) * ROUNDS);
            CHECKF(part[1] == (long)(nn - 1) * ROUNDS, "fetch-and-op counter %ld", part[1]);
        } else {
            long one = 1, old;
            MPI_OK(MPI_Win_lock_all(0, sw));
            for (int k = 0; k < ROUNDS; k++) {
                MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 1, MPI_SUM, sw));
                MPI_OK(MPI_Win_flush(0, sw));
                MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, sw));
                MPI_OK(MPI_Win_flush(0, sw));
            }
            MPI_OK(MPI_Win_unlock_all(sw));
        }
        MPI_OK(MPI_Barrier(node));
        MPI_OK(MPI_Win_free(&sw));
    }
    MPI_OK(MPI_Comm_free(&node));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK async\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
