/* rfast.c - the request-based one-sided calls (MPI_Rput, MPI_Rget,
 * MPI_Raccumulate, MPI_Rget_accumulate and their _c forms) on the fast path of
 * the direct path and next to the general path: byte checks of puts and gets
 * of 1 to 4096 bytes at odd displacements, each request complete at once
 * (MPI_Test says so on its first call) or waited for, some freed with
 * MPI_Request_free, many at once in MPI_Waitall; concurrent accumulates from
 * every rank to every rank (fast path and derived datatypes: the general path)
 * with exact sums; fetch tickets all distinct; MPI_NO_OP reads with a NULL
 * origin; every error still reported with its class (the fast path never
 * reports one itself). On MPI_Win_allocate windows (the direct path on one
 * node; with MADMPI_RMA_DIRECT=0 the general path does everything) and on an
 * MPI_Win_create window (the general path). Any number of ranks. */
#include "../p2p/common.h"

#define N 4096
#define ROUNDS 100

static void born_complete(MPI_Request *r)
{
    int flag = 0;
    MPI_OK(MPI_Test(r, &flag, MPI_STATUS_IGNORE));
    if (!flag) /* (the general path's requests may take a while) */
        MPI_OK(MPI_Wait(r, MPI_STATUS_IGNORE));
    CHECK(*r == MPI_REQUEST_NULL);
}

static void run(MPI_Win win, unsigned char *mem, int direct)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *src = malloc(N), *dst = malloc(N);
    MPI_Request r, many[64];

    MPI_OK(MPI_Win_lock_all(0, win));
    /* Puts of 1..N bytes at odd displacements into the right neighbour's
     * first half, checked by gets back (of both forms). */
    for (int len = 1; len <= N / 2; len = len * 3 + 1) {
        int disp = len % 7;
        for (int i = 0; i < len; i++)
            src[i] = (unsigned char)(me * 31 + len + i);
        MPI_OK(MPI_Rput(src, len, MPI_BYTE, right, disp, len, MPI_BYTE, win, &r));
        born_complete(&r);
        MPI_OK(MPI_Win_flush(right, win));
        memset(dst, 0xee, N);
        MPI_OK(MPI_Rget_c(dst, len, MPI_BYTE, right, disp, len, MPI_BYTE, win, &r));
        if (direct) {
            int flag = 0;
            MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            CHECKF(flag, "an Rget on the direct path is complete when issued (len %d)", len);
        } else {
            MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        for (int i = 0; i < len; i++)
            CHECKF(dst[i] == src[i], "len %d byte %d: %d != %d", len, i, dst[i], src[i]);
        CHECK(dst[len] == 0xee);
        /* An 8-byte put and a 4-byte get as other types, freed unwaited. */
        MPI_OK(MPI_Rput_c(src, 1, MPI_DOUBLE, right, N / 2 + 8, 1, MPI_DOUBLE, win, &r));
        MPI_OK(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL);
        MPI_OK(MPI_Win_flush(right, win));
        MPI_OK(MPI_Rget(dst, 2, MPI_SHORT, right, N / 2 + 8, 2, MPI_SHORT, win, &r));
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(memcmp(dst, src, 4) == 0);
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Concurrent accumulates from every rank to every rank: longs at
     * N/2 + 64 (fast path), ints at N/2 + 128 through a derived type (general
     * path), doubles under the accumulate lock; tickets at N/2 + 256. */
    long *lmem = (long *)(mem + N / 2 + 64);
    int *imem = (int *)(mem + N / 2 + 128);
    double *dmem = (double *)(mem + N / 2 + 192);
    long *tmem = (long *)(mem + N / 2 + 256);
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    lmem[0] = lmem[1] = 0;
    imem[0] = imem[1] = 0;
    dmem[0] = 0;
    tmem[0] = 0;
    MPI_OK(MPI_Win_unlock(me, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Datatype two_ints;
    MPI_OK(MPI_Type_contiguous(2, MPI_INT, &two_ints));
    MPI_OK(MPI_Type_commit(&two_ints));
    long one_two[2] = {1, 2}, *tickets = malloc(ROUNDS * sizeof(long));
    int ints[2] = {3, 4};
    double half = 0.5;
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < ROUNDS; k++) {
        int t = k % n;
        int q = 0;
        MPI_OK(MPI_Raccumulate(one_two, 2, MPI_LONG, t, N / 2 + 64, 2, MPI_LONG,
                               MPI_SUM, win, &many[q++]));
        MPI_OK(MPI_Raccumulate_c(ints, 1, two_ints, t, N / 2 + 128, 2, MPI_INT,
                                 MPI_SUM, win, &many[q++]));
        MPI_OK(MPI_Raccumulate(&half, 1, MPI_DOUBLE, t, N / 2 + 192, 1,
                               MPI_DOUBLE, MPI_SUM, win, &many[q++]));
        long one = 1;
        MPI_OK(MPI_Rget_accumulate(&one, 1, MPI_LONG, &tickets[k], 1, MPI_LONG, 0,
                                   N / 2 + 256, 1, MPI_LONG, MPI_SUM, win,
                                   &many[q++]));
        if (k % 2) /* (its ticket lands by the flush at the latest) */
            MPI_OK(MPI_Request_free(&many[--q]));
        MPI_OK(MPI_Waitall(q, many, MPI_STATUSES_IGNORE));
        for (int i = 0; i < q; i++)
            CHECK(many[i] == MPI_REQUEST_NULL);
    }
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int mine = 0; /* accumulates each rank received */
    for (int s = 0; s < n; s++)
        for (int k = 0; k < ROUNDS; k++)
            mine += k % n == me;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
    CHECKF(lmem[0] == mine && lmem[1] == 2L * mine, "longs %ld %ld, want %d", lmem[0], lmem[1],
           mine);
    CHECKF(imem[0] == 3 * mine && imem[1] == 4 * mine, "ints %d %d", imem[0], imem[1]);
    CHECKF(dmem[0] == 0.5 * mine, "doubles %g", dmem[0]);
    MPI_OK(MPI_Win_unlock(me, win));
    /* Tickets: every rank fetched ROUNDS of them from rank 0; those of the
     * requests waited for are all distinct. */
    long *all = malloc((size_t)n * ROUNDS * sizeof(long));
    MPI_OK(MPI_Gather(tickets, ROUNDS, MPI_LONG, all, ROUNDS, MPI_LONG, 0, MPI_COMM_WORLD));
    if (me == 0) {
        CHECKF(tmem[0] == (long)n * ROUNDS, "ticket counter %ld", tmem[0]);
        char *seen = calloc((size_t)n * ROUNDS, 1);
        for (int s = 0; s < n; s++)
            for (int k = 0; k < ROUNDS; k += 2) {
                long v = all[s * ROUNDS + k];
                CHECKF(v >= 0 && v < (long)n * ROUNDS && !seen[v], "ticket %ld", v);
                seen[v] = 1;
            }
        free(seen);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* MPI_NO_OP reads with a NULL origin, both forms. */
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win));
    long got[2] = {-1, -1};
    MPI_OK(MPI_Rget_accumulate(NULL, 0, MPI_LONG, got, 2, MPI_LONG, left,
                               N / 2 + 64, 2, MPI_LONG, MPI_NO_OP, win, &r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    int theirs = 0;
    for (int k = 0; k < ROUNDS; k++)
        theirs += k % n == left;
    theirs *= n;
    CHECKF(got[0] == theirs && got[1] == 2L * theirs, "no-op read %ld %ld", got[0], got[1]);
    MPI_OK(MPI_Rget_accumulate_c(NULL, 0, MPI_LONG, got, 1, MPI_LONG, left,
                                 N / 2 + 64, 1, MPI_LONG, MPI_NO_OP, win, &r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(got[0] == theirs);

    /* Errors, with their classes, through every request-based call. */
    int v = 1, w = 0;
    r = MPI_REQUEST_NULL;
    EXPECT_CLASS(MPI_Rput(&v, 1, MPI_INT, left, N - 2, 1, MPI_INT, win, &r), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Rget(&v, 1, MPI_INT, left, -1, 1, MPI_INT, win, &r), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Raccumulate(&v, 1, MPI_INT, left, N - 2, 1, MPI_INT, MPI_SUM, win, &r),
                 MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Rget_accumulate(&v, 1, MPI_INT, &w, 1, MPI_INT, left, N - 2, 1, MPI_INT,
                                     MPI_SUM, win, &r),
                 MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Rput(&v, 1, MPI_INT, left, 0, 1, MPI_INT, win, NULL), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Rput(&v, 1, MPI_INT, n, 0, 1, MPI_INT, win, &r), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Rput(&v, -1, MPI_INT, left, 0, 1, MPI_INT, win, &r), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Rput(&v, 1, MPI_INT, left, 0, 1, MPI_DOUBLE, win, &r), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Rget(NULL, 1, MPI_INT, left, 0, 1, MPI_INT, win, &r), MPI_ERR_BUFFER);
    double dv = 1;
    EXPECT_CLASS(MPI_Raccumulate(&dv, 1, MPI_DOUBLE, left, 0, 1, MPI_DOUBLE, MPI_BAND, win, &r),
                 MPI_ERR_OP);
    CHECK(r == MPI_REQUEST_NULL);
    MPI_OK(MPI_Win_unlock(left, win));
    /* No epoch. */
    EXPECT_CLASS(MPI_Rput(&v, 1, MPI_INT, left, 0, 1, MPI_INT, win, &r), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Rget_accumulate(&v, 1, MPI_INT, &w, 1, MPI_INT, left, 0, 1, MPI_INT,
                                     MPI_SUM, win, &r),
                 MPI_ERR_RMA_SYNC);
    /* MPI_PROC_NULL: a request that completes at once. */
    MPI_OK(MPI_Rput(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win, &r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Type_free(&two_ints));
    free(all);
    free(tickets);
    free(src);
    free(dst);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const char *d = getenv("MADMPI_RMA_DIRECT");
    int direct = is_madmpi() && !(d && strcmp(d, "0") == 0);
    unsigned char *mem = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(N, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    memset(mem, 0, N);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    run(win, mem, direct);
    MPI_OK(MPI_Win_free(&win));

    unsigned char *own = calloc(N, 1);
    MPI_OK(MPI_Win_create(own, N, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    run(win, own, 0);
    MPI_OK(MPI_Win_free(&win));
    free(own);

    if (t_rank == 0)
        printf("OK rfast\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
