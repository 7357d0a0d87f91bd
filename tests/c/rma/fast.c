/* fast.c - the fast path of one-sided calls on the direct path (contiguous
 * predefined datatypes, done at once in the call), next to the general path
 * on the same window, on MPI_Win_allocate, MPI_Win_allocate_shared and
 * MPI_Win_create windows (the last never takes the direct path: every call
 * falls back):
 *   - byte checks of puts and gets of 1 to 4096 bytes at odd displacements,
 *     of every width the fast path copies in one load and store, of types
 *     with and without holes (MPI_SHORT_INT takes the general path), a put
 *     whose origin overlaps its target in the origin's own part (direct
 *     windows);
 *   - concurrent accumulates from every rank, the target's own included,
 *     mixing fast-path calls (predefined types) and general-path calls (a
 *     contiguous derived type, request-based forms) on the same elements:
 *     integer sums and bit operations (atomic instructions), double sums and
 *     maxima (the accumulate lock), sums on a misaligned int; fetch-and-op
 *     tickets taken by both paths on one counter all distinct;
 *   - get-accumulate and fetch-and-op with MPI_NO_OP and a NULL origin,
 *     compare-and-swap on aligned and misaligned elements;
 *   - every error class the general path gives, through the fast path's
 *     calls: MPI_ERR_RMA_RANGE, MPI_ERR_RMA_SYNC (no epoch; a flush outside a
 *     passive epoch), MPI_ERR_RANK (also for a flush inside lock_all),
 *     MPI_ERR_OP, MPI_ERR_COUNT, MPI_ERR_BUFFER, MPI_ERR_TYPE; MPI_PROC_NULL
 *     as a target does nothing.
 * Argument "multiple": MPI_THREAD_MULTIPLE (every call takes the engine lock
 * instead of owner mode). Any number of ranks. */
#include "../p2p/common.h"
#include <stddef.h>

#define ROUNDS 200
#define BYTES 8192

struct layout {
    int isum;          /* SUM, fast and derived-type accumulates */
    int ibor;          /* BOR */
    long long llsum;   /* SUM, fast and Raccumulate */
    double dsum;       /* SUM (accumulate lock), fast and derived */
    double dmax;       /* MAX (accumulate lock) */
    int ticket;        /* fetch-and-op (fast) and get-accumulate (derived) */
    long cas;          /* compare-and-swap */
    char pad[5];
    char oddi[8];      /* a misaligned int */
    char oddl[16];     /* a misaligned long */
    unsigned char bytes[BYTES];
};

#define OFF(f) ((MPI_Aint)offsetof(struct layout, f))

/* A place in field `at` whose address is 1 more than a multiple of `align`. */
static MPI_Aint odd_off(MPI_Aint at, int align)
{
    while (at % align != 1)
        at++;
    return at;
}

static void bytes_and_errors(MPI_Win win, struct layout *L, int me, int n, int direct,
                             const char *what)
{
    int right = (me + 1) % n, left = (me + n - 1) % n;
    static const int sizes[] = {1, 2, 3, 4, 8, 12, 16, 24, 100, 4096};
    unsigned char src[4096], got[4160];
    MPI_OK(MPI_Win_lock_all(0, win));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int len = sizes[s];
        MPI_Aint disp = 1 + (MPI_Aint)s * 7; /* odd displacements */
        MPI_Aint at = OFF(bytes) + disp;
        fill(src, (size_t)len, (unsigned)me, (unsigned)s);
        MPI_OK(MPI_Put(src, len, MPI_BYTE, right, at, len, MPI_BYTE, win));
        MPI_OK(MPI_Win_flush(right, win));
        memset(got, 0xee, sizeof got);
        MPI_OK(MPI_Get(got, len, MPI_BYTE, right, at, len, MPI_BYTE, win));
        MPI_OK(MPI_Win_flush_local(right, win));
        CHECKF(memcmp(got, src, (size_t)len) == 0, "%s: %d bytes read back", what, len);
        CHECKF(got[len] == 0xee, "%s: a get of %d bytes wrote past its end", what, len);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Win_sync(win));
        unsigned char want[4096];
        fill(want, (size_t)len, (unsigned)left, (unsigned)s);
        CHECKF(memcmp(L->bytes + disp, want, (size_t)len) == 0, "%s: %d bytes from the left",
               what, len);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    /* Typed puts and gets: ints, doubles, 2INT pairs (contiguous), SHORT_INT
     * pairs (a hole: the general path), at an aligned place. */
    MPI_Aint base = OFF(bytes) + 4096 + 64;
    int iv[6] = {1 + me, -2, 3, -4, 5, 6 * me};
    MPI_OK(MPI_Put(iv, 6, MPI_INT, right, base, 3, MPI_2INT, win));
    double dv[3] = {0.5 * me, -1.25, 3e100};
    MPI_OK(MPI_Put(dv, 3, MPI_DOUBLE, right, base + 64, 3, MPI_DOUBLE, win));
    struct {
        short v;
        int k;
    } si[2] = {{7, me}, {-7, -me}};
    MPI_OK(MPI_Put(si, 2, MPI_SHORT_INT, right, base + 128, 2, MPI_SHORT_INT, win));
    MPI_OK(MPI_Win_flush_all(win));
    int iw[6];
    double dw[3];
    struct {
        short v;
        int k;
    } sw[2];
    MPI_OK(MPI_Get(iw, 3, MPI_2INT, right, base, 6, MPI_INT, win));
    MPI_OK(MPI_Get(dw, 3, MPI_DOUBLE, right, base + 64, 3, MPI_DOUBLE, win));
    MPI_OK(MPI_Get(sw, 2, MPI_SHORT_INT, right, base + 128, 2, MPI_SHORT_INT, win));
    MPI_OK(MPI_Win_flush_local_all(win));
    CHECKF(memcmp(iw, iv, sizeof iv) == 0, "%s: ints", what);
    CHECKF(memcmp(dw, dv, sizeof dv) == 0, "%s: doubles", what);
    CHECKF(sw[0].v == 7 && sw[0].k == me && sw[1].v == -7 && sw[1].k == -me, "%s: short_int",
           what);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* A put from this process's own part to an overlapping place of it
     * (erroneous by the standard's rules on conflicting accesses; the direct
     * path is a memmove, as docs/rma.md says: checked there only). */
    if (direct) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
        unsigned char *b = L->bytes + 6000;
        for (int i = 0; i < 64; i++)
            b[i] = (unsigned char)i;
        MPI_OK(MPI_Put(b, 16, MPI_BYTE, me, OFF(bytes) + 6000 + 4, 16, MPI_BYTE, win));
        MPI_OK(MPI_Put(b + 32, 8, MPI_BYTE, me, OFF(bytes) + 6000 + 30, 8, MPI_BYTE, win));
        MPI_OK(MPI_Win_flush(me, win));
        for (int i = 0; i < 4; i++)
            CHECKF(b[i] == i, "%s: overlap %d", what, i);
        for (int i = 0; i < 16; i++)
            CHECKF(b[4 + i] == i, "%s: overlapping put [%d] = %d", what, 4 + i, b[4 + i]);
        for (int i = 0; i < 8; i++)
            CHECKF(b[30 + i] == 32 + i, "%s: overlapping put [%d] = %d", what, 30 + i, b[30 + i]);
        MPI_OK(MPI_Win_unlock(me, win));
    }

    /* Errors, returned. */
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int v = 1, w = 0;
    double d = 1.0;
    MPI_Aint size = (MPI_Aint)sizeof *L;
    EXPECT_CLASS(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Get(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Accumulate(&v, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, win),
                 MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Fetch_and_op(&v, &w, MPI_INT, right, 0, MPI_SUM, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Compare_and_swap(&v, &w, &w, MPI_INT, right, 0, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_flush(right, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_flush_all(win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_flush_local(right, win), MPI_ERR_RMA_SYNC);
    MPI_OK(MPI_Win_lock_all(0, win));
    EXPECT_CLASS(MPI_Put(&v, 1, MPI_INT, right, size - 2, 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Put(&v, 1, MPI_INT, right, size, 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Get(&v, 1, MPI_INT, right, -1, 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Accumulate(&d, 1, MPI_DOUBLE, right, size - 4, 1, MPI_DOUBLE, MPI_SUM, win),
                 MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Fetch_and_op(&v, &w, MPI_INT, right, size, MPI_SUM, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Compare_and_swap(&v, &w, &w, MPI_INT, right, size, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Put(&v, 1, MPI_INT, n, 0, 1, MPI_INT, win), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Get(&v, 1, MPI_INT, -5, 0, 1, MPI_INT, win), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Win_flush(n, win), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Win_flush_local(-5, win), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Accumulate(&d, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, MPI_BAND, win),
                 MPI_ERR_OP);
    EXPECT_CLASS(MPI_Fetch_and_op(&d, &d, MPI_DOUBLE, right, 0, MPI_BXOR, win), MPI_ERR_OP);
    EXPECT_CLASS(MPI_Put(&v, -1, MPI_INT, right, 0, -1, MPI_INT, win), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Put(NULL, 1, MPI_INT, right, 0, 1, MPI_INT, win), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_DOUBLE, win), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Accumulate(&v, 1, MPI_INT, right, 0, 1, MPI_UNSIGNED, MPI_SUM, win),
                 MPI_ERR_TYPE);
    /* Compare-and-swap takes integer, logical and byte types, not floating
     * point (MPICH's errors/rma/cas_type_check). */
    {
        double dc = 0.0, dr = 0.0, z[2] = {0.0, 0.0}, zr[2];
        float fc = 0.0f, fr = 0.0f;
        EXPECT_CLASS(MPI_Compare_and_swap(&d, &dc, &dr, MPI_DOUBLE, right, 0, win), MPI_ERR_TYPE);
        EXPECT_CLASS(MPI_Compare_and_swap(&fc, &fc, &fr, MPI_FLOAT, right, 0, win), MPI_ERR_TYPE);
        EXPECT_CLASS(MPI_Compare_and_swap(z, z, zr, MPI_C_DOUBLE_COMPLEX, right, 0, win),
                     MPI_ERR_TYPE);
    }
    /* MPI_PROC_NULL: nothing, successfully. */
    MPI_OK(MPI_Put(&v, 1, MPI_INT, MPI_PROC_NULL, size * 4, 1, MPI_INT, win));
    MPI_OK(MPI_Get(&v, 1, MPI_INT, MPI_PROC_NULL, -8, 1, MPI_INT, win));
    MPI_OK(MPI_Accumulate(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_flush(MPI_PROC_NULL, win));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_ARE_FATAL));
}

static void accumulates(MPI_Win win, struct layout *L, int me, int n, const char *what)
{
    MPI_Datatype cint, cdouble; /* contiguous derived types: the general path */
    MPI_OK(MPI_Type_contiguous(1, MPI_INT, &cint));
    MPI_OK(MPI_Type_commit(&cint));
    MPI_OK(MPI_Type_contiguous(1, MPI_DOUBLE, &cdouble));
    MPI_OK(MPI_Type_commit(&cdouble));
    int one = 1, prev = -1;
    int *tickets = malloc(ROUNDS * sizeof(int));
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < ROUNDS; k++) {
        int slow = (k + me) % 2; /* half the calls of each rank by each path */
        long long ll = 3;
        double half = 0.5, mx = (double)(me * ROUNDS + k);
        int bit = 1 << ((me + k) % 31);
        if (slow) {
            MPI_Request r;
            MPI_OK(MPI_Accumulate(&one, 1, cint, 0, OFF(isum), 1, cint, MPI_SUM, win));
            MPI_OK(MPI_Raccumulate(&ll, 1, MPI_LONG_LONG, 0, OFF(llsum), 1, MPI_LONG_LONG,
                                   MPI_SUM, win, &r));
            MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Accumulate(&half, 1, cdouble, 0, OFF(dsum), 1, cdouble, MPI_SUM, win));
            MPI_OK(MPI_Accumulate(&mx, 1, cdouble, 0, OFF(dmax), 1, cdouble, MPI_MAX, win));
            MPI_OK(MPI_Accumulate(&bit, 1, cint, 0, OFF(ibor), 1, cint, MPI_BOR, win));
            MPI_OK(MPI_Get_accumulate(&one, 1, cint, &tickets[k], 1, cint, 0, OFF(ticket), 1,
                                      cint, MPI_SUM, win));
            MPI_OK(MPI_Accumulate(&one, 1, cint, 0, odd_off(OFF(oddi), 4), 1, cint, MPI_SUM,
                                  win));
        } else {
            MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, OFF(isum), 1, MPI_INT, MPI_SUM, win));
            MPI_OK(MPI_Accumulate(&ll, 1, MPI_LONG_LONG, 0, OFF(llsum), 1, MPI_LONG_LONG,
                                  MPI_SUM, win));
            MPI_OK(MPI_Accumulate(&half, 1, MPI_DOUBLE, 0, OFF(dsum), 1, MPI_DOUBLE, MPI_SUM,
                                  win));
            MPI_OK(MPI_Accumulate(&mx, 1, MPI_DOUBLE, 0, OFF(dmax), 1, MPI_DOUBLE, MPI_MAX, win));
            MPI_OK(MPI_Accumulate(&bit, 1, MPI_INT, 0, OFF(ibor), 1, MPI_INT, MPI_BOR, win));
            MPI_OK(MPI_Fetch_and_op(&one, &tickets[k], MPI_INT, 0, OFF(ticket), MPI_SUM, win));
            MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, odd_off(OFF(oddi), 4), 1, MPI_INT,
                                  MPI_SUM, win));
        }
        MPI_OK(MPI_Win_flush(0, win));
        /* A NO_OP read (NULL origin) sees a count that only grows. */
        int seen = -1;
        MPI_OK(MPI_Fetch_and_op(NULL, &seen, MPI_INT, 0, OFF(isum), MPI_NO_OP, win));
        MPI_OK(MPI_Win_flush(0, win));
        CHECKF(seen >= prev && seen >= 1, "%s: sum read %d after %d", what, seen, prev);
        prev = seen;
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int *all = malloc((size_t)n * ROUNDS * sizeof(int));
    MPI_OK(MPI_Gather(tickets, ROUNDS, MPI_INT, all, ROUNDS, MPI_INT, 0, MPI_COMM_WORLD));
    if (me == 0) {
        long total = (long)n * ROUNDS;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int isum = 0, ticket = 0, ibor = 0, odd = 0;
        long long llsum = 0;
        double dsum = 0, dmax = 0;
        MPI_OK(MPI_Get(&isum, 1, MPI_INT, 0, OFF(isum), 1, MPI_INT, win));
        MPI_OK(MPI_Get(&ibor, 1, MPI_INT, 0, OFF(ibor), 1, MPI_INT, win));
        MPI_OK(MPI_Get(&llsum, 1, MPI_LONG_LONG, 0, OFF(llsum), 1, MPI_LONG_LONG, win));
        MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_DATATYPE_NULL, &dsum, 1, MPI_DOUBLE, 0, OFF(dsum),
                                  1, MPI_DOUBLE, MPI_NO_OP, win));
        MPI_OK(MPI_Get(&dmax, 1, MPI_DOUBLE, 0, OFF(dmax), 1, MPI_DOUBLE, win));
        MPI_OK(MPI_Get(&ticket, 1, MPI_INT, 0, OFF(ticket), 1, MPI_INT, win));
        MPI_OK(MPI_Get(&odd, 1, MPI_INT, 0, odd_off(OFF(oddi), 4), 1, MPI_INT, win));
        MPI_OK(MPI_Win_unlock(0, win));
        CHECKF(isum == total && L->isum == total, "%s: int sum %d", what, isum);
        CHECKF(llsum == 3 * total, "%s: long long sum %lld", what, llsum);
        CHECKF(dsum == 0.5 * (double)total, "%s: double sum %f", what, dsum);
        CHECKF(dmax == (double)(total - 1), "%s: double max %f", what, dmax);
        int bits = 0;
        for (int r = 0; r < n; r++)
            for (int k = 0; k < ROUNDS; k++)
                bits |= 1 << ((r + k) % 31);
        CHECKF(ibor == bits, "%s: bor %x (want %x)", what, ibor, bits);
        CHECKF(ticket == total, "%s: ticket counter %d", what, ticket);
        CHECKF(odd == total, "%s: misaligned int sum %d", what, odd);
        char *seen = calloc((size_t)total, 1);
        for (long i = 0; i < total; i++) {
            CHECKF(all[i] >= 0 && all[i] < total && !seen[all[i]], "%s: ticket %d", what,
                   all[i]);
            seen[all[i]] = 1;
        }
        free(seen);
    }
    free(all);
    free(tickets);

    /* Compare-and-swap: a mutex on an aligned long (atomic instruction), and
     * swaps of a misaligned long (accumulate lock), from every rank. */
    MPI_Aint oddl = odd_off(OFF(oddl), 8);
    for (int k = 0; k < 20; k++) {
        long unlocked = 0, locked = me + 1, got = -1;
        MPI_OK(MPI_Win_lock_all(0, win));
        do {
            MPI_OK(MPI_Compare_and_swap(&locked, &unlocked, &got, MPI_LONG, 0, OFF(cas), win));
            MPI_OK(MPI_Win_flush(0, win));
        } while (got != 0);
        long v = -1, w;
        MPI_OK(MPI_Get(&v, 1, MPI_LONG, 0, oddl, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        w = v + 1;
        MPI_OK(MPI_Compare_and_swap(&w, &v, &got, MPI_LONG, 0, oddl, win));
        MPI_OK(MPI_Win_flush(0, win));
        CHECKF(got == v, "%s: misaligned cas under the mutex saw %ld, not %ld", what, got, v);
        MPI_OK(MPI_Compare_and_swap(&unlocked, &locked, &got, MPI_LONG, 0, OFF(cas), win));
        MPI_OK(MPI_Win_unlock_all(win));
        CHECK(got == locked);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        long v;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Get(&v, 1, MPI_LONG, 0, oddl, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_unlock(0, win));
        CHECKF(v == 20L * n, "%s: misaligned cas counter %ld", what, v);
    }
    MPI_OK(MPI_Type_free(&cint));
    MPI_OK(MPI_Type_free(&cdouble));
}

int main(int argc, char **argv)
{
    int multiple = argc > 1 && strcmp(argv[1], "multiple") == 0, got;
    if (multiple) {
        MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got));
        CHECK(got == MPI_THREAD_MULTIPLE);
    } else {
        MPI_OK(MPI_Init(&argc, &argv));
    }
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    static const char *names[] = {"allocate", "allocate_shared", "create"};
    for (int kind = 0; kind < 3; kind++) {
        struct layout *L = NULL;
        MPI_Win win;
        if (kind == 0)
            MPI_OK(MPI_Win_allocate(sizeof *L, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &L, &win));
        else if (kind == 1)
            MPI_OK(MPI_Win_allocate_shared(sizeof *L, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &L, &win));
        else {
            MPI_OK(MPI_Alloc_mem(sizeof *L, MPI_INFO_NULL, &L));
            MPI_OK(MPI_Win_create(L, sizeof *L, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        }
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
        memset(L, 0, sizeof *L);
        L->dmax = -1.0;
        MPI_OK(MPI_Win_unlock(me, win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        bytes_and_errors(win, L, me, n, kind < 2, names[kind]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        accumulates(win, L, me, n, names[kind]);
        MPI_OK(MPI_Win_free(&win));
        if (kind == 2)
            MPI_OK(MPI_Free_mem(L));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK fast\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
