/* pairs.c - accumulates on types whose elements have a hole or are split
 * across segments: MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT and a
 * contiguous type of MPI_SHORT_INT (whose flattened segments join the int of
 * one element with the short of the next). Checks MAXLOC/MINLOC/REPLACE
 * accumulates from every rank, get-accumulate with MPI_NO_OP reading pairs
 * that another rank keeps replacing (no torn pair may be seen),
 * fetch-and-op on a pair, and that the padding bytes of the target are never
 * written. Any number of ranks. */
#include "../p2p/common.h"

#include <stddef.h>

#define N 16
#define ROUNDS 300
#define PAD 0xA5

struct si { short v; int loc; };
struct di { double v; int loc; };
struct ldi { long double v; int loc; };

/* Every padding byte of the n elements of `extent` bytes at p is still PAD
 * (the data bytes are [0, a) and [b, b + bn) of each element). */
static int padding_intact(const unsigned char *p, int n, size_t extent, size_t a, size_t b,
                          size_t bn)
{
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < extent; k++) {
            int data = k < a || (k >= b && k < b + bn);
            if (!data && p[(size_t)i * extent + k] != PAD)
                return 0;
        }
    return 1;
}

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    size_t bytes = N * (sizeof(struct si) + sizeof(struct di) + sizeof(struct ldi));
    unsigned char *mem = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    memset(mem, PAD, bytes);
    struct si *tsi = (struct si *)mem;
    struct di *tdi = (struct di *)(mem + N * sizeof(struct si));
    struct ldi *tldi = (struct ldi *)(mem + N * (sizeof(struct si) + sizeof(struct di)));
    MPI_Aint dsi = 0, ddi = N * sizeof(struct si),
             dldi = N * (sizeof(struct si) + sizeof(struct di));
    /* Start values: through the data members only, so the padding keeps PAD. */
    for (int i = 0; i < N; i++) {
        tsi[i].v = -1;
        tsi[i].loc = -1;
        tdi[i].v = -1.0;
        tdi[i].loc = -1;
        tldi[i].v = 1e9L;
        tldi[i].loc = -1;
    }
    MPI_Datatype four; /* its segments join the int of one pair with the short of the next */
    MPI_OK(MPI_Type_contiguous(4, MPI_SHORT_INT, &four));
    MPI_OK(MPI_Type_commit(&four));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* MAXLOC and MINLOC from every rank to rank 0, element i: the winner is
     * the rank with the largest (smallest) value, ties to the lowest rank. */
    struct si osi[N];
    struct di odi[N];
    struct ldi oldi[N];
    for (int i = 0; i < N; i++) {
        osi[i].v = (short)((me * 7 + i) % n);
        osi[i].loc = me;
        odi[i].v = (double)((me * 3 + i) % n) + 0.5;
        odi[i].loc = me;
        oldi[i].v = (long double)((me + i) % n);
        oldi[i].loc = me;
    }
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    /* The first half through `four`, the second pair by pair. */
    MPI_OK(MPI_Accumulate(osi, N / 2, MPI_SHORT_INT, 0, dsi, N / 8, four, MPI_MAXLOC, win));
    MPI_OK(MPI_Accumulate(osi + N / 2, N / 2, MPI_SHORT_INT, 0, dsi + N / 2 * sizeof(struct si),
                          N / 2, MPI_SHORT_INT, MPI_MAXLOC, win));
    MPI_OK(MPI_Accumulate(odi, N, MPI_DOUBLE_INT, 0, ddi, N, MPI_DOUBLE_INT, MPI_MAXLOC, win));
    MPI_OK(MPI_Accumulate(oldi, N, MPI_LONG_DOUBLE_INT, 0, dldi, N, MPI_LONG_DOUBLE_INT,
                          MPI_MINLOC, win));
    MPI_OK(MPI_Win_unlock(0, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        for (int i = 0; i < N; i++) {
            int bs = -1, bd = -1, bl = -1;
            short vs = -1;
            double vd = -1.0;
            long double vl = 1e9L;
            for (int r = 0; r < n; r++) {
                short s = (short)((r * 7 + i) % n);
                double d = (double)((r * 3 + i) % n) + 0.5;
                long double l = (long double)((r + i) % n);
                if (s > vs) { vs = s; bs = r; }
                if (d > vd) { vd = d; bd = r; }
                if (l < vl) { vl = l; bl = r; }
            }
            CHECKF(tsi[i].v == vs && tsi[i].loc == bs, "short_int %d: (%d,%d) want (%d,%d)", i,
                   tsi[i].v, tsi[i].loc, vs, bs);
            CHECKF(tdi[i].v == vd && tdi[i].loc == bd, "double_int %d: (%g,%d) want (%g,%d)", i,
                   tdi[i].v, tdi[i].loc, vd, bd);
            CHECKF(tldi[i].v == vl && tldi[i].loc == bl, "long_double_int %d: loc %d want %d", i,
                   tldi[i].loc, bl);
        }
        CHECK(padding_intact((unsigned char *)tsi, N, sizeof(struct si), sizeof(short),
                             offsetof(struct si, loc), sizeof(int)));
        CHECK(padding_intact((unsigned char *)tdi, N, sizeof(struct di), sizeof(double),
                             offsetof(struct di, loc), sizeof(int)));
        for (int i = 0; i < N; i++)
            tsi[i].v = (short)(tsi[i].loc = 0);
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Atomic pairs: the last rank keeps replacing rank 0's MPI_SHORT_INT
     * elements with (k, k) through a contiguous type of 4 pairs (whose
     * segments split elements); everyone else reads them with get-accumulate
     * and MPI_NO_OP and must never see a pair whose halves differ. */
    MPI_OK(MPI_Win_lock_all(0, win));
    if (me == n - 1) {
        for (int k = 0; k < ROUNDS; k++) {
            struct si w[N];
            for (int i = 0; i < N; i++) {
                w[i].v = (short)k;
                w[i].loc = k;
            }
            MPI_OK(MPI_Accumulate(w, N, MPI_SHORT_INT, 0, dsi, N / 4, four, MPI_REPLACE, win));
            MPI_OK(MPI_Win_flush(0, win));
        }
    }
    if (me != n - 1 || n == 1) {
        for (int k = 0; k < ROUNDS; k++) {
            struct si r[N];
            memset(r, 0, sizeof r);
            MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_SHORT_INT, r, N / 4, four, 0, dsi, N,
                                      MPI_SHORT_INT, MPI_NO_OP, win));
            MPI_OK(MPI_Win_flush(0, win));
            for (int i = 0; i < N; i++)
                CHECKF(r[i].v == (short)r[i].loc, "torn pair %d: (%d,%d)", i, r[i].v, r[i].loc);
        }
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        for (int i = 0; i < N; i++)
            CHECK(tsi[i].v == ROUNDS - 1 && tsi[i].loc == ROUNDS - 1);
        CHECK(padding_intact((unsigned char *)tsi, N, sizeof(struct si), sizeof(short),
                             offsetof(struct si, loc), sizeof(int)));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Fetch-and-op on a pair: a MAXLOC "highest bidder" on rank 0's first
     * double_int; every rank gets back the pair before its own bid. */
    if (me == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        tdi[0].v = -1.0;
        tdi[0].loc = -1;
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    struct di bid = {(double)me, me}, before = {-7.0, -7};
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPI_OK(MPI_Fetch_and_op(&bid, &before, MPI_DOUBLE_INT, 0, ddi, MPI_MAXLOC, win));
    MPI_OK(MPI_Win_unlock(0, win));
    CHECKF(before.loc >= -1 && before.loc < n && before.v == (double)before.loc,
           "fetched (%g,%d)", before.v, before.loc);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECKF(tdi[0].v == (double)(n - 1) && tdi[0].loc == n - 1, "bid (%g,%d)", tdi[0].v,
               tdi[0].loc);
        CHECK(padding_intact((unsigned char *)tdi, N, sizeof(struct di), sizeof(double),
                             offsetof(struct di, loc), sizeof(int)));
        MPI_OK(MPI_Win_unlock(0, win));
    }

    MPI_OK(MPI_Type_free(&four));
    MPI_OK(MPI_Win_free(&win));
    if (me == 0)
        printf("OK pairs\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
