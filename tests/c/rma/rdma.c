/* rdma.c - puts and gets checked byte for byte, written for the RDMA path of windows
 * registered with the ofi transport (MADMPI_TRANSPORTS=ofi, MADMPI_RMA_DIRECT=0: fi_write and
 * fi_read into the target's window), and passing on the message path as well:
 *  1. fence epochs on MPI_Win_create (displacement unit 4) and MPI_Win_allocate windows:
 *     puts to the right neighbour of 1 byte to 4 MiB at odd displacements, read back by gets;
 *  2. lock/flush: exclusive lock, put, flush, get, flush; flush_local then the origin buffer
 *     reused; shared lock of every rank on one target, each writing its own block;
 *  3. derived datatypes: a vector target (8 runs), a vector origin (packed), a vector result
 *     (unpacked), a target of 100 runs;
 *  4. MPI_Rput/MPI_Rget under lock_all, completed by MPI_Wait / MPI_Waitall;
 *  5. a busy target: rank 0 computes without any MPI call while every other rank locks it,
 *     puts 1 MiB, flushes, gets it back and unlocks.
 * At least 2 ranks. */
#include "../p2p/common.h"

#define WIN_BYTES (9u << 20)

static const size_t SIZES[] = {1, 8, 100, 4096, 65539, 1u << 20, 4u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static double compute(void)
{
    volatile double x = 1.0;
    for (long i = 0; i < 30000000L; i++)
        x = x * 1.0000001 + 1e-9;
    return x;
}

/* Fence epochs: put SIZES[k] bytes at byte offset off_k of the right neighbour's window, get
 * them back from it; check the bytes that arrived from the left neighbour and those read. */
static void fence_round(MPI_Win win, unsigned char *mem, int disp_unit, const char *what)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *src = xmalloc(4u << 20), *back = xmalloc(4u << 20);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t len = SIZES[k], off = (size_t)disp_unit * (3 + 5 * k);
        memset(mem, 0, WIN_BYTES);
        fill(src, len, (unsigned)me, (unsigned)k);
        MPI_OK(MPI_Win_fence(0, win));
        MPI_OK(MPI_Put(src, (int)len, MPI_BYTE, right, (MPI_Aint)(off / disp_unit), (int)len,
                       MPI_BYTE, win));
        MPI_OK(MPI_Win_fence(0, win));
        long bad = verify(mem + off, len, (unsigned)left, (unsigned)k);
        CHECKF(bad < 0, "%s: put of %zu bytes from %d: byte %ld wrong", what, len, left, bad);
        CHECKF(mem[off - 1] == 0 && mem[off + len] == 0, "%s: put of %zu wrote outside", what,
               len);
        memset(back, 0, len);
        MPI_OK(MPI_Get(back, (int)len, MPI_BYTE, right, (MPI_Aint)(off / disp_unit), (int)len,
                       MPI_BYTE, win));
        MPI_OK(MPI_Win_fence(0, win));
        bad = verify(back, len, (unsigned)me, (unsigned)k);
        CHECKF(bad < 0, "%s: get of %zu bytes: byte %ld wrong", what, len, bad);
    }
    free(src);
    free(back);
}

static void passive_round(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size, right = (me + 1) % n;
    size_t len = 300000;
    unsigned char *src = xmalloc(len), *back = xmalloc(len);
    memset(mem, 0, WIN_BYTES);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    fill(src, len, 7, (unsigned)me);
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    MPI_OK(MPI_Put(src, (int)len, MPI_BYTE, right, 1000, (int)len, MPI_BYTE, win));
    MPI_OK(MPI_Win_flush(right, win));
    MPI_OK(MPI_Get(back, (int)len, MPI_BYTE, right, 1000, (int)len, MPI_BYTE, win));
    MPI_OK(MPI_Win_flush(right, win));
    long bad = verify(back, len, 7, (unsigned)me);
    CHECKF(bad < 0, "lock/flush: byte %ld read back wrong", bad);
    /* flush_local: the origin buffer may be reused; the target has the old contents. */
    MPI_OK(MPI_Put(src, 64, MPI_BYTE, right, 0, 64, MPI_BYTE, win));
    MPI_OK(MPI_Win_flush_local(right, win));
    memset(src, 0xEE, 64);
    MPI_OK(MPI_Win_unlock(right, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    bad = verify(mem, 64, 7, (unsigned)((me + n - 1) % n));
    CHECKF(bad < 0, "flush_local: byte %ld wrong at the target", bad);

    /* Every rank writes its own 4 KiB block of rank 0's window under a shared lock. */
    fill(src, 4096, 9, (unsigned)me);
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPI_OK(MPI_Put(src, 4096, MPI_BYTE, 0, 8192 + 4096 * me, 4096, MPI_BYTE, win));
    MPI_OK(MPI_Win_unlock(0, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        for (int r = 0; r < n; r++) {
            bad = verify(mem + 8192 + 4096 * r, 4096, 9, (unsigned)r);
            CHECKF(bad < 0, "shared lock: block of rank %d: byte %ld wrong", r, bad);
        }
    free(src);
    free(back);
}

static void datatype_round(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    MPI_Datatype vec8, vec100;
    /* 8 runs of 1000 bytes, 3000 apart; 100 runs of 10 bytes, 20 apart. */
    MPI_OK(MPI_Type_vector(8, 1000, 3000, MPI_BYTE, &vec8));
    MPI_OK(MPI_Type_vector(100, 10, 20, MPI_BYTE, &vec100));
    MPI_OK(MPI_Type_commit(&vec8));
    MPI_OK(MPI_Type_commit(&vec100));
    unsigned char *src = xmalloc(24000), *back = xmalloc(24000);
    memset(mem, 0, WIN_BYTES);
    fill(src, 8000, 3, (unsigned)me);
    MPI_OK(MPI_Win_fence(0, win));
    /* contiguous origin -> vector target */
    MPI_OK(MPI_Put(src, 8000, MPI_BYTE, right, 5, 1, vec8, win));
    /* contiguous origin -> 100-run target */
    MPI_OK(MPI_Put(src, 1000, MPI_BYTE, right, 100000, 1, vec100, win));
    MPI_OK(MPI_Win_fence(0, win));
    {
        unsigned char *want = xmalloc(8000);
        fill(want, 8000, 3, (unsigned)left);
        for (int i = 0; i < 8; i++)
            CHECKF(memcmp(mem + 5 + 3000 * i, want + 1000 * i, 1000) == 0,
                   "vector target: run %d wrong", i);
        CHECK(mem[4] == 0 && mem[5 + 1000] == 0);
        for (int i = 0; i < 100; i++)
            CHECKF(memcmp(mem + 100000 + 20 * i, want + 10 * i, 10) == 0,
                   "100-run target: run %d wrong", i);
        free(want);
    }
    /* vector origin (packed) -> contiguous target; get into a vector result (unpacked) */
    for (int i = 0; i < 8; i++)
        fill(src + 3000 * i, 1000, 4, (unsigned)(me * 8 + i));
    MPI_OK(MPI_Put(src, 1, vec8, right, 200000, 8000, MPI_BYTE, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 8; i++) {
        long bad = verify(mem + 200000 + 1000 * i, 1000, 4, (unsigned)(left * 8 + i));
        CHECKF(bad < 0, "vector origin: run %d byte %ld wrong", i, bad);
    }
    memset(back, 0, 24000);
    MPI_OK(MPI_Get(back, 1, vec8, right, 200000, 8000, MPI_BYTE, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 8; i++) {
        long bad = verify(back + 3000 * i, 1000, 4, (unsigned)(me * 8 + i));
        CHECKF(bad < 0, "vector result: run %d byte %ld wrong", i, bad);
        if (i < 7)
            CHECK(back[3000 * i + 1000] == 0);
    }
    MPI_OK(MPI_Type_free(&vec8));
    MPI_OK(MPI_Type_free(&vec100));
    free(src);
    free(back);
}

static void request_round(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    enum { K = 16, L = 5000 };
    unsigned char *src = xmalloc(K * L), *back = xmalloc(K * L);
    MPI_Request r[K];
    memset(mem, 0, WIN_BYTES);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    fill(src, K * L, 5, (unsigned)me);
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < K; i++)
        MPI_OK(MPI_Rput(src + i * L, L, MPI_BYTE, right, 64 + i * L, L, MPI_BYTE, win, &r[i]));
    MPI_OK(MPI_Waitall(K, r, MPI_STATUSES_IGNORE));
    MPI_OK(MPI_Win_flush(right, win));
    memset(back, 0, K * L);
    for (int i = 0; i < K; i++)
        MPI_OK(MPI_Rget(back + i * L, L, MPI_BYTE, right, 64 + i * L, L, MPI_BYTE, win, &r[i]));
    for (int i = 0; i < K; i++)
        MPI_OK(MPI_Wait(&r[i], MPI_STATUS_IGNORE));
    long bad = verify(back, K * L, 5, (unsigned)me);
    CHECKF(bad < 0, "Rput/Rget: byte %ld wrong", bad);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    bad = verify(mem + 64, K * L, 5, (unsigned)left);
    CHECKF(bad < 0, "Rput: byte %ld wrong at the target", bad);
    free(src);
    free(back);
}

static void busy_round(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size;
    size_t len = 1u << 20;
    memset(mem, 0, WIN_BYTES);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        double x = compute(); /* no MPI call while the origins work */
        CHECK(x > 0);
    } else {
        unsigned char *src = xmalloc(len), *back = xmalloc(len);
        fill(src, len, 11, (unsigned)me);
        size_t at = (size_t)(me - 1) * len % (WIN_BYTES - len);
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Put(src, (int)len, MPI_BYTE, 0, (MPI_Aint)at, (int)len, MPI_BYTE, win));
        MPI_OK(MPI_Win_flush(0, win));
        MPI_OK(MPI_Get(back, (int)len, MPI_BYTE, 0, (MPI_Aint)at, (int)len, MPI_BYTE, win));
        MPI_OK(MPI_Win_unlock(0, win));
        long bad = verify(back, len, 11, (unsigned)me);
        CHECKF(bad < 0, "busy target: byte %ld read back wrong", bad);
        free(src);
        free(back);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0 && n <= 9)
        for (int r = 1; r < n; r++) {
            size_t at = (size_t)(r - 1) * len % (WIN_BYTES - len);
            long bad = verify(mem + at, len, 11, (unsigned)r);
            CHECKF(bad < 0, "busy target: block of rank %d byte %ld wrong", r, bad);
        }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size < 2) {
        t_done("rdma");
        return 0;
    }
    MPI_Win win;
    unsigned char *mem = xmalloc(WIN_BYTES);
    MPI_OK(MPI_Win_create(mem, WIN_BYTES, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    fence_round(win, mem, 4, "Win_create");
    MPI_OK(MPI_Win_free(&win));

    unsigned char *amem = NULL;
    MPI_OK(MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &amem, &win));
    fence_round(win, amem, 1, "Win_allocate");
    passive_round(win, amem);
    datatype_round(win, amem);
    request_round(win, amem);
    busy_round(win, amem);
    MPI_OK(MPI_Win_free(&win));
    free(mem);
    t_done("rdma");
    return 0;
}
