/* direct.c - what the direct path on one node must keep true (and what the
 * active-message path keeps true as well: the test runs on both), on windows
 * made by MPI_Win_allocate and by MPI_Win_allocate_shared:
 *   - concurrent accumulates from every rank, the target's own included, to
 *     one target, on every kind of element: 4- and 8-byte integers and
 *     floating point (hardware atomics), chars, shorts, long doubles, pairs
 *     with a hole and misaligned ints (the accumulate lock), mixed in one
 *     epoch: the target checks exact results;
 *   - fetch-and-op tickets on an int and on a double counter all distinct;
 *   - exclusive lock holders never overlap (a counter of holders inside the
 *     window, read by shared holders too);
 *   - a compare-and-swap mutex protecting a get + put increment;
 *   - fence and post/start/complete/wait epochs see the direct puts.
 * Any number of ranks. */
#include "../p2p/common.h"
#include <stddef.h>

#define ROUNDS 100

/* The layout of the window of rank 0 (bytes). */
struct layout {
    int i[4];          /* SUM, BXOR, MAX, MIN */
    long long ll[2];   /* SUM, BOR */
    double d[2];       /* SUM, MAX */
    float f;           /* SUM */
    int ticket;        /* fetch-and-op SUM */
    double dticket;    /* fetch-and-op SUM on a double */
    char c[4];         /* SUM (lock path) */
    short s[2];        /* SUM (lock path) */
    long double ld;    /* SUM (lock path) */
    struct {
        double v;
        int k;
    } dmax;            /* MAXLOC on MPI_DOUBLE_INT (a pair with a hole) */
    int pair[2];       /* MINLOC on MPI_2INT */
    int inside;        /* exclusive holders inside */
    int excl;          /* incremented by get + put under the exclusive lock */
    long mutex;        /* compare-and-swap mutex */
    long guarded;      /* incremented by get + put under the mutex */
    char pad[3];
    char odd[8];       /* an int at an odd address (disp_unit 1): lock path */
    int fenced[64];
    int pscw[64];
};

#define OFF(f) ((MPI_Aint)offsetof(struct layout, f))

/* An int inside `odd` at an address that is not a multiple of 4. */
static MPI_Aint odd_off(void)
{
    MPI_Aint o = OFF(odd) + 1;
    return o % 4 == 0 ? o + 1 : o;
}

static void run(MPI_Win win, struct layout *L, int me, int n, const char *what)
{
    int one = 1, neg = -1;
    /* Concurrent accumulates of every kind under lock_all. */
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < ROUNDS; k++) {
        int iv[4] = {1, 1 << (me % 30), me * 1000 + k, -(me * 1000 + k)};
        MPI_OK(MPI_Accumulate(&iv[0], 1, MPI_INT, 0, OFF(i[0]), 1, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Accumulate(&iv[1], 1, MPI_INT, 0, OFF(i[1]), 1, MPI_INT, MPI_BXOR, win));
        MPI_OK(MPI_Accumulate(&iv[2], 1, MPI_INT, 0, OFF(i[2]), 1, MPI_INT, MPI_MAX, win));
        MPI_OK(MPI_Accumulate(&iv[3], 1, MPI_INT, 0, OFF(i[3]), 1, MPI_INT, MPI_MIN, win));
        long long lv[2] = {3, 1LL << (me % 60)};
        MPI_OK(MPI_Accumulate(&lv[0], 1, MPI_LONG_LONG, 0, OFF(ll[0]), 1, MPI_LONG_LONG,
                              MPI_SUM, win));
        MPI_OK(MPI_Accumulate(&lv[1], 1, MPI_LONG_LONG, 0, OFF(ll[1]), 1, MPI_LONG_LONG,
                              MPI_BOR, win));
        double dv[2] = {0.5, (double)(me * ROUNDS + k)};
        MPI_OK(MPI_Accumulate(&dv[0], 1, MPI_DOUBLE, 0, OFF(d[0]), 1, MPI_DOUBLE, MPI_SUM, win));
        MPI_OK(MPI_Accumulate(&dv[1], 1, MPI_DOUBLE, 0, OFF(d[1]), 1, MPI_DOUBLE, MPI_MAX, win));
        float fv = 2.0f;
        MPI_OK(MPI_Accumulate(&fv, 1, MPI_FLOAT, 0, OFF(f), 1, MPI_FLOAT, MPI_SUM, win));
        char cv[4] = {1, 1, 1, 1};
        MPI_OK(MPI_Accumulate(cv, 4, MPI_CHAR, 0, OFF(c), 4, MPI_CHAR, MPI_SUM, win));
        short sv[2] = {1, 2};
        MPI_OK(MPI_Accumulate(sv, 2, MPI_SHORT, 0, OFF(s), 2, MPI_SHORT, MPI_SUM, win));
        long double ldv = 1.0L;
        MPI_OK(MPI_Accumulate(&ldv, 1, MPI_LONG_DOUBLE, 0, OFF(ld), 1, MPI_LONG_DOUBLE, MPI_SUM,
                              win));
        struct {
            double v;
            int k;
        } dm = {(double)((me * 7 + k) % (n * 5)), me};
        MPI_OK(MPI_Accumulate(&dm, 1, MPI_DOUBLE_INT, 0, OFF(dmax), 1, MPI_DOUBLE_INT, MPI_MAXLOC,
                              win));
        int pv[2] = {k - me, me};
        MPI_OK(MPI_Accumulate(pv, 1, MPI_2INT, 0, OFF(pair), 1, MPI_2INT, MPI_MINLOC, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, odd_off(), 1, MPI_INT, MPI_SUM, win));
        if (k % 10 == 0)
            MPI_OK(MPI_Win_flush(0, win));
    }
    /* Fetch-and-op tickets: all distinct. */
    int *tickets = malloc(ROUNDS * sizeof(int));
    double *dtickets = malloc(ROUNDS * sizeof(double));
    double done = 1.0;
    for (int k = 0; k < ROUNDS; k++) {
        MPI_OK(MPI_Fetch_and_op(&one, &tickets[k], MPI_INT, 0, OFF(ticket), MPI_SUM, win));
        MPI_OK(MPI_Fetch_and_op(&done, &dtickets[k], MPI_DOUBLE, 0, OFF(dticket), MPI_SUM, win));
        MPI_OK(MPI_Win_flush(0, win));
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int *all = malloc((size_t)n * ROUNDS * sizeof(int));
    double *dall = malloc((size_t)n * ROUNDS * sizeof(double));
    MPI_OK(MPI_Gather(tickets, ROUNDS, MPI_INT, all, ROUNDS, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_OK(MPI_Gather(dtickets, ROUNDS, MPI_DOUBLE, dall, ROUNDS, MPI_DOUBLE, 0,
                      MPI_COMM_WORLD));
    if (me == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        long total = (long)n * ROUNDS;
        CHECKF(L->i[0] == total, "%s: int sum %d", what, L->i[0]);
        int x = 0;
        for (int r = 0; r < n; r++)
            x ^= (ROUNDS % 2) ? 1 << (r % 30) : 0;
        CHECKF(L->i[1] == x, "%s: int bxor %d", what, L->i[1]);
        CHECKF(L->i[2] == (n - 1) * 1000 + ROUNDS - 1, "%s: int max %d", what, L->i[2]);
        CHECKF(L->i[3] == -((n - 1) * 1000 + ROUNDS - 1), "%s: int min %d", what, L->i[3]);
        CHECKF(L->ll[0] == 3 * total, "%s: long long sum %lld", what, L->ll[0]);
        long long bits = 0;
        for (int r = 0; r < n; r++)
            bits |= 1LL << (r % 60);
        CHECKF(L->ll[1] == bits, "%s: long long bor %llx", what, L->ll[1]);
        CHECKF(L->d[0] == 0.5 * (double)total, "%s: double sum %f", what, L->d[0]);
        CHECKF(L->d[1] == (double)(total - 1), "%s: double max %f", what, L->d[1]);
        CHECKF(L->f == 2.0f * (float)total, "%s: float sum %f", what, (double)L->f);
        for (int j = 0; j < 4; j++)
            CHECKF(L->c[j] == (char)(total % 256), "%s: char sum %d", what, L->c[j]);
        CHECKF(L->s[0] == (short)total && L->s[1] == (short)(2 * total), "%s: short sums %d %d",
               what, L->s[0], L->s[1]);
        CHECKF(L->ld == (long double)total, "%s: long double sum %Lf", what, L->ld);
        /* MAXLOC: the largest value, the smallest rank that gave it. */
        double best = -1;
        int who = -1;
        for (int r = 0; r < n; r++)
            for (int k = 0; k < ROUNDS; k++) {
                double v = (double)((r * 7 + k) % (n * 5));
                if (v > best) {
                    best = v;
                    who = r;
                }
            }
        CHECKF(L->dmax.v == best && L->dmax.k == who, "%s: maxloc %f %d", what, L->dmax.v,
               L->dmax.k);
        CHECKF(L->pair[0] == -(n - 1) && L->pair[1] == n - 1, "%s: minloc %d %d", what,
               L->pair[0], L->pair[1]);
        int odd;
        memcpy(&odd, (char *)L + odd_off(), sizeof odd);
        CHECKF(odd == total, "%s: misaligned int sum %d", what, odd);
        CHECKF(L->ticket == total && L->dticket == (double)total, "%s: counters %d %f", what,
               L->ticket, L->dticket);
        char *seen = calloc((size_t)total, 1), *dseen = calloc((size_t)total, 1);
        for (long i = 0; i < total; i++) {
            CHECKF(all[i] >= 0 && all[i] < total && !seen[all[i]], "%s: ticket %d", what, all[i]);
            seen[all[i]] = 1;
            long d = (long)dall[i];
            CHECKF(dall[i] == (double)d && d >= 0 && d < total && !dseen[d], "%s: ticket %f",
                   what, dall[i]);
            dseen[d] = 1;
        }
        free(seen);
        free(dseen);
        MPI_OK(MPI_Win_unlock(0, win));
    }
    free(tickets);
    free(dtickets);
    free(all);
    free(dall);

    /* Exclusive holders never overlap; shared holders never see one inside. */
    for (int k = 0; k < ROUNDS / 2; k++) {
        int prev = -1, val = 0;
        if (k % 3 == 2) {
            MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
            MPI_OK(MPI_Get(&prev, 1, MPI_INT, 0, OFF(inside), 1, MPI_INT, win));
            MPI_OK(MPI_Win_unlock(0, win));
            CHECKF(prev == 0, "%s: a shared holder saw %d exclusive holders", what, prev);
            continue;
        }
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Fetch_and_op(&one, &prev, MPI_INT, 0, OFF(inside), MPI_SUM, win));
        MPI_OK(MPI_Win_flush(0, win));
        CHECKF(prev == 0, "%s: %d other exclusive holders inside", what, prev);
        MPI_OK(MPI_Get(&val, 1, MPI_INT, 0, OFF(excl), 1, MPI_INT, win));
        MPI_OK(MPI_Win_flush(0, win));
        val += 1;
        MPI_OK(MPI_Put(&val, 1, MPI_INT, 0, OFF(excl), 1, MPI_INT, win));
        MPI_OK(MPI_Accumulate(&neg, 1, MPI_INT, 0, OFF(inside), 1, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    /* A compare-and-swap mutex. */
    for (int k = 0; k < ROUNDS / 4; k++) {
        long unlocked = 0, locked = me + 1, prev = -1, val = 0;
        MPI_OK(MPI_Win_lock_all(0, win));
        do {
            MPI_OK(MPI_Compare_and_swap(&locked, &unlocked, &prev, MPI_LONG, 0, OFF(mutex), win));
            MPI_OK(MPI_Win_flush(0, win));
        } while (prev != 0);
        MPI_OK(MPI_Get(&val, 1, MPI_LONG, 0, OFF(guarded), 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        val += 1;
        MPI_OK(MPI_Put(&val, 1, MPI_LONG, 0, OFF(guarded), 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        MPI_OK(MPI_Compare_and_swap(&unlocked, &locked, &prev, MPI_LONG, 0, OFF(mutex), win));
        MPI_OK(MPI_Win_unlock_all(win));
        CHECK(prev == locked);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int excl_rounds = 0;
        for (int k = 0; k < ROUNDS / 2; k++)
            excl_rounds += k % 3 != 2;
        CHECKF(L->excl == excl_rounds * n && L->inside == 0, "%s: exclusive counter %d (%d)",
               what, L->excl, L->inside);
        CHECKF(L->guarded == (long)(ROUNDS / 4) * n && L->mutex == 0, "%s: guarded %ld", what,
               L->guarded);
        MPI_OK(MPI_Win_unlock(0, win));
    }

    /* Fence: every rank puts its number into slot `me` of every rank. */
    int right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_OK(MPI_Win_fence(0, win));
    for (int t = 0; t < n; t++) {
        int v = 100 + me;
        MPI_OK(MPI_Put(&v, 1, MPI_INT, t, OFF(fenced) + (MPI_Aint)(me % 64) * 4, 1, MPI_INT, win));
    }
    MPI_OK(MPI_Win_fence(0, win));
    for (int r = 0; r < n && r < 64; r++)
        CHECKF(L->fenced[r] == 100 + r, "%s: fenced[%d] = %d", what, r, L->fenced[r]);
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    /* PSCW: a ring, each rank puts to its right neighbour then reads back. */
    MPI_Group world, gl, gr;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Group_incl(world, 1, &left, &gl));
    MPI_OK(MPI_Group_incl(world, 1, &right, &gr));
    for (int k = 0; k < 10; k++) {
        MPI_OK(MPI_Win_post(gl, 0, win));
        MPI_OK(MPI_Win_start(gr, 0, win));
        int v = me * 100 + k;
        MPI_OK(MPI_Put(&v, 1, MPI_INT, right, OFF(pscw) + (MPI_Aint)(k % 64) * 4, 1, MPI_INT,
                       win));
        MPI_OK(MPI_Win_complete(win));
        MPI_OK(MPI_Win_wait(win));
        CHECKF(L->pscw[k % 64] == left * 100 + k, "%s: pscw %d", what, L->pscw[k % 64]);
    }
    MPI_OK(MPI_Group_free(&gl));
    MPI_OK(MPI_Group_free(&gr));
    MPI_OK(MPI_Group_free(&world));
}

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    for (int shared = 0; shared < 2; shared++) {
        struct layout *L = NULL;
        MPI_Win win;
        if (shared)
            MPI_OK(MPI_Win_allocate_shared(sizeof *L, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &L, &win));
        else
            MPI_OK(MPI_Win_allocate(sizeof *L, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &L, &win));
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
        memset(L, 0, sizeof *L);
        L->i[2] = -1000000;
        L->i[3] = 1000000;
        L->d[1] = -1.0;
        L->dmax.v = -1.0;
        L->dmax.k = -1;
        L->pair[0] = 1000000;
        MPI_OK(MPI_Win_unlock(me, win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        run(win, L, me, n, shared ? "allocate_shared" : "allocate");
        MPI_OK(MPI_Win_free(&win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK direct\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
