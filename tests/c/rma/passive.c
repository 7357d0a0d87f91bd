/* passive.c - passive-target communication: exclusive and shared locks,
 * lock_all + flush, concurrent accumulates from every rank to one target
 * (atomicity), a fetch-and-op counter, a compare-and-swap spin lock,
 * request-based operations, and a target that computes without calling MPI
 * while the others use its window; a window on MPI_COMM_SELF locked and
 * unlocked by its owner, freed at once, then a new one in its place (nothing of
 * the first may be read by the second: the test checks stderr for dropped
 * chunks). Any number of ranks. */
#include "../p2p/common.h"

#define ROUNDS 200

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    long *mem = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(64 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                            &win));
    for (int i = 0; i < 64; i++)
        mem[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Concurrent accumulates to rank 0 under shared locks: the sum is exact. */
    long one = 1, two[2] = {1, 2};
    for (int k = 0; k < ROUNDS; k++) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Accumulate(two, 2, MPI_LONG, 0, 1, 2, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    /* A fetch-and-op counter: every ticket is handed out once. */
    long ticket = -1, *tickets = malloc(ROUNDS * sizeof(long));
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < ROUNDS; k++) {
        MPI_OK(MPI_Fetch_and_op(&one, &ticket, MPI_LONG, 0, 3, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(0, win));
        tickets[k] = ticket;
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    long *all = malloc((size_t)n * ROUNDS * sizeof(long));
    MPI_OK(MPI_Gather(tickets, ROUNDS, MPI_LONG, all, ROUNDS, MPI_LONG, 0, MPI_COMM_WORLD));
    if (me == 0) {
        CHECKF(mem[0] == (long)n * ROUNDS, "sum %ld", mem[0]);
        CHECK(mem[1] == (long)n * ROUNDS && mem[2] == 2L * n * ROUNDS);
        CHECKF(mem[3] == (long)n * ROUNDS, "counter %ld", mem[3]);
        char *seen = calloc((size_t)n * ROUNDS, 1);
        for (long i = 0; i < (long)n * ROUNDS; i++) {
            CHECKF(all[i] >= 0 && all[i] < (long)n * ROUNDS && !seen[all[i]], "ticket %ld",
                   all[i]);
            seen[all[i]] = 1;
        }
        free(seen);
    }

    /* A compare-and-swap spin lock on rank 0's slot 4 protecting a
     * read-modify-write of slot 5 made of a get and a put. */
    for (int k = 0; k < 20; k++) {
        long unlocked = 0, locked = me + 1, prev = -1;
        MPI_OK(MPI_Win_lock_all(0, win));
        do {
            MPI_OK(MPI_Compare_and_swap(&locked, &unlocked, &prev, MPI_LONG, 0, 4, win));
            MPI_OK(MPI_Win_flush(0, win));
        } while (prev != 0);
        long val = 0;
        MPI_OK(MPI_Get(&val, 1, MPI_LONG, 0, 5, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        val += 1;
        MPI_OK(MPI_Put(&val, 1, MPI_LONG, 0, 5, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        MPI_OK(MPI_Compare_and_swap(&unlocked, &locked, &prev, MPI_LONG, 0, 4, win));
        MPI_OK(MPI_Win_unlock_all(win));
        CHECK(prev == locked);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        CHECKF(mem[5] == 20L * n, "protected counter %ld", mem[5]);

    /* Exclusive locks: a read-modify-write of slot 6 with get + put. */
    for (int k = 0; k < 20; k++) {
        long val = 0;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Get(&val, 1, MPI_LONG, 0, 6, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        val += 2;
        MPI_OK(MPI_Put(&val, 1, MPI_LONG, 0, 6, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        CHECKF(mem[6] == 40L * n, "exclusive counter %ld", mem[6]);

    /* Request-based operations with lock_all. */
    int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_OK(MPI_Win_lock_all(0, win));
    long v = 1000 + me, r = 0;
    MPI_Request rq[3];
    MPI_OK(MPI_Rput(&v, 1, MPI_LONG, right, 10 + me % 8, 1, MPI_LONG, win, &rq[0]));
    MPI_OK(MPI_Waitall(1, rq, MPI_STATUSES_IGNORE));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Raccumulate(&one, 1, MPI_LONG, right, 20, 1, MPI_LONG, MPI_SUM, win, &rq[0]));
    MPI_OK(MPI_Rget_accumulate(&one, 1, MPI_LONG, &r, 1, MPI_LONG, right, 21, 1, MPI_LONG,
                               MPI_SUM, win, &rq[1]));
    MPI_OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK(r == 0);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECKF(mem[10 + left % 8] == 1000 + left || n > 8, "rput %ld", mem[10 + left % 8]);
    CHECK(mem[20] == 1 && mem[21] == 1);
    MPI_OK(MPI_Win_lock_all(0, win));
    long got = -1;
    MPI_OK(MPI_Rget(&got, 1, MPI_LONG, left, 20, 1, MPI_LONG, win, &rq[2]));
    MPI_OK(MPI_Wait(&rq[2], MPI_STATUS_IGNORE));
    CHECK(got == 1);
    MPI_OK(MPI_Win_unlock_all(win));

    /* A target that computes (no MPI call) for a while: the others' operations
     * are served when it calls MPI again, and nobody deadlocks. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        /* (MPI_Wtime is a local clock read: it makes no progress.) */
        double t0 = MPI_Wtime();
        volatile double x = 0;
        do {
            for (int i = 0; i < 100000; i++)
                x += i * 0.5;
        } while (MPI_Wtime() - t0 < 0.2);
    } else {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, 30, 1, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        CHECKF(mem[30] == n - 1, "busy target got %ld", mem[30]);

    /* Epoch errors: a lock held twice, a flush without a lock. */
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int rc, cls;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    rc = MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);
    MPI_OK(MPI_Win_unlock(right, win));
    rc = MPI_Win_flush(right, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);
    rc = MPI_Get(&got, 1, MPI_LONG, right, 0, 1, MPI_LONG, win);
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC);

    MPI_OK(MPI_Win_free(&win));

    /* Lock oneself, unlock, free at once; then the same number again for a new window,
     * with messages to oneself in between (whose progress reads what is left to read). */
    long own[4] = {0, 0, 0, 0};
    for (int round = 0; round < 4; round++) {
        MPI_Win w1;
        MPI_OK(MPI_Win_create(own, sizeof own, sizeof(long), MPI_INFO_NULL, MPI_COMM_SELF, &w1));
        MPI_OK(MPI_Win_lock(round % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, 0, 0, w1));
        if (round == 3) {
            long v = 5;
            MPI_OK(MPI_Put(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, w1));
        }
        MPI_OK(MPI_Win_unlock(0, w1));
        MPI_OK(MPI_Win_free(&w1));
        int x = round, y = -1;
        MPI_Request q;
        MPI_OK(MPI_Issend(&x, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &q));
        MPI_OK(MPI_Recv(&y, 1, MPI_INT, 0, 9, MPI_COMM_SELF, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(y == round);
    }
    CHECK(own[1] == 5);

    free(tickets);
    free(all);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK passive\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
