/* batch.c - many small one-sided operations in one epoch, the case where the
 * active-message path sends untracked puts and accumulates (no per-operation
 * token; the target answers each packet's worth with one count): byte checks
 * of thousands of small puts of 1 to 64 bytes at odd displacements to every
 * other rank, checked by gets after the flush and by the target after a
 * barrier; puts and accumulates to one element interleaved with gets in one
 * batch (the order the standard's default accumulate ordering gives); a
 * buffer reused after MPI_Win_flush_local (small batched puts, and puts of
 * 2 KiB to 1 MiB, after flush_local and flush_local_all); a batch of 64-byte puts far larger
 * than one packet; exact sums of concurrent accumulates from every rank in
 * lock_all, exclusive-lock and fence epochs (the unlock and the fence complete
 * them); a put to a dynamic window's address that is not attached, refused by
 * the target, reported as MPI_ERR_RMA_RANGE by the next flush while the
 * epoch's other puts land. On MPI_Win_allocate (the direct path on one node
 * unless MADMPI_RMA_DIRECT=0) and MPI_Win_create windows. Any number of
 * ranks. */
#include "../p2p/common.h"

#define SLOTS 4096          /* 8-byte slots per rank's part */
#define BIG (1 << 20)       /* the batch larger than a packet: bytes per target */
#define SIZE (SLOTS * 8 + BIG)

static unsigned char bpat(int from, int i) { return (unsigned char)(from * 37 + i * 11 + 5); }

static void small_puts(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size;
    unsigned char src[16], back[16];
    /* Every origin writes its own 400 16-byte cells of each other rank's
     * part: sizes 1..16 at odd displacements inside each cell. */
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < n; t++) {
        if (t == me)
            continue;
        for (int i = 0; i < 400; i++) {
            int len = 1 + (i * 7) % 16, cell = me * 400 + i;
            MPI_Aint disp = (MPI_Aint)cell * 16 + (16 - len) / 2;
            for (int k = 0; k < len; k++)
                src[k] = bpat(me, i + k);
            MPI_OK(MPI_Put(src, len, MPI_BYTE, t, disp, len, MPI_BYTE, win));
            memset(src, 0xcc, sizeof src); /* copied when issued */
        }
        MPI_OK(MPI_Win_flush(t, win));
        for (int i = 0; i < 400; i += 7) {
            int len = 1 + (i * 7) % 16, cell = me * 400 + i;
            MPI_Aint disp = (MPI_Aint)cell * 16 + (16 - len) / 2;
            memset(back, 0, sizeof back);
            MPI_OK(MPI_Get(back, len, MPI_BYTE, t, disp, len, MPI_BYTE, win));
            MPI_OK(MPI_Win_flush(t, win));
            for (int k = 0; k < len; k++)
                CHECKF(back[k] == bpat(me, i + k), "put %d to %d byte %d: %d", i, t, k, back[k]);
        }
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* The target's own view of every origin's puts. */
    for (int from = 0; from < n; from++) {
        if (from == me)
            continue;
        for (int i = 0; i < 400; i++) {
            int len = 1 + (i * 7) % 16, at = (from * 400 + i) * 16 + (16 - len) / 2;
            for (int k = 0; k < len; k++)
                CHECKF(mem[at + k] == bpat(from, i + k), "from %d put %d byte %d", from, i, k);
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Replacing and summing accumulates of one element in one batch, with
 * no-op get-accumulates between them: each read sees the accumulates issued
 * before it (the default accumulate ordering); then puts and gets separated by
 * flushes. */
static void ordering(MPI_Win win)
{
    int me = t_rank, n = t_size, right = (me + 1) % n;
    long v, one = 1, got[50];
    MPI_Aint slot = SLOTS - 1;
    if (n < 2)
        return;
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    for (int i = 0; i < 50; i++) {
        v = 1000 * i;
        MPI_OK(MPI_Accumulate(&v, 1, MPI_LONG, right, slot * 8, 1, MPI_LONG, MPI_REPLACE, win));
        for (int k = 0; k < i % 5; k++)
            MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, right, slot * 8, 1, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_LONG, &got[i], 1, MPI_LONG, right, slot * 8, 1,
                                  MPI_LONG, MPI_NO_OP, win));
    }
    MPI_OK(MPI_Win_flush(right, win));
    for (int i = 0; i < 50; i++)
        CHECKF(got[i] == 1000 * i + i % 5, "read %d saw %ld", i, got[i]);
    for (int i = 0; i < 50; i++) {
        v = 7 * i;
        MPI_OK(MPI_Put(&v, 1, MPI_LONG, right, slot * 8, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(right, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, right, slot * 8, 1, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(right, win));
        MPI_OK(MPI_Get(&got[i], 1, MPI_LONG, right, slot * 8, 1, MPI_LONG, win));
        MPI_OK(MPI_Win_flush(right, win));
        CHECKF(got[i] == 7 * i + 1, "put, sum, get %d: %ld", i, got[i]);
    }
    MPI_OK(MPI_Win_unlock(right, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* MPI_Win_flush_local: the origin buffer may be reused; MPI_Win_flush: the
 * data is at the target. */
static void flushes(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    long buf[16], back[16];
    if (n < 2)
        return;
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int r = 0; r < 20; r++) {
        for (int i = 0; i < 16; i++) {
            buf[i] = r * 100 + i + me;
            MPI_OK(MPI_Put(&buf[i], 1, MPI_LONG, right, 8 * (16 * r + i), 1, MPI_LONG, win));
        }
        MPI_OK(MPI_Win_flush_local(right, win));
        for (int i = 0; i < 16; i++)
            buf[i] = -1;
    }
    MPI_OK(MPI_Win_flush(right, win));
    MPI_OK(MPI_Get(back, 16, MPI_LONG, right, 8 * 16 * 19, 16, MPI_LONG, win));
    MPI_OK(MPI_Win_flush(right, win));
    for (int i = 0; i < 16; i++)
        CHECKF(back[i] == 1900 + i + me, "flush_local round 19 slot %d: %ld", i, back[i]);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    long *l = (long *)mem;
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < 16; i++)
            CHECKF(l[16 * r + i] == r * 100 + i + left, "slot %d,%d: %ld", r, i, l[16 * r + i]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Many more small puts than one packet holds, to the right neighbour: the
 * flush waits for every one of them. */
static void big_batch(MPI_Win win, unsigned char *mem)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char src[64];
    if (n < 2)
        return;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    for (int i = 0; i < BIG / 64; i++) {
        for (int k = 0; k < 64; k++)
            src[k] = bpat(me, i + k);
        MPI_OK(MPI_Put(src, 64, MPI_BYTE, right, SLOTS * 8 + (MPI_Aint)i * 64, 64, MPI_BYTE,
                       win));
    }
    MPI_OK(MPI_Win_unlock(right, win));
    /* Unlocked: complete at the target. */
    MPI_OK(MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, right, 7, MPI_BOTTOM, 0, MPI_BYTE, left, 7,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
    for (int i = 0; i < BIG / 64; i++)
        for (int k = 0; k < 64; k++)
            CHECKF(mem[SLOTS * 8 + i * 64 + k] == bpat(left, i + k), "big put %d byte %d", i, k);
    MPI_OK(MPI_Win_unlock(me, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* MPI_Win_flush_local and MPI_Win_flush_local_all after untracked puts too
 * large for a batch (one chunk of the general path, and several chunks up to
 * the whole 1 MiB region): the origin buffer may be reused at once, so every
 * byte must have left (been sent or copied) by then. Each round overwrites
 * the source right after the local flush; the target must see the round's
 * pattern, never the overwrite. */
static void flush_local_large(MPI_Win win, unsigned char *mem)
{
    static const int sizes[] = {2048, 65536, BIG};
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *src = malloc(BIG);
    if (n < 2) {
        free(src);
        return;
    }
    for (int s = 0; s < 3; s++) {
        int len = sizes[s];
        for (int all = 0; all < 2; all++) {
            int tag = s * 2 + all; /* this round's pattern */
            MPI_OK(MPI_Win_lock_all(0, win));
            for (int i = 0; i < len; i++)
                src[i] = bpat(me + tag, i);
            MPI_OK(MPI_Put(src, len, MPI_BYTE, right, SLOTS * 8, len, MPI_BYTE, win));
            if (all)
                MPI_OK(MPI_Win_flush_local_all(win));
            else
                MPI_OK(MPI_Win_flush_local(right, win));
            memset(src, 0xee, (size_t)len); /* reused: must not reach the target */
            MPI_OK(MPI_Win_unlock_all(win));
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
            for (int i = 0; i < len; i++)
                CHECKF(mem[SLOTS * 8 + i] == bpat(left + tag, i),
                       "flush_local%s put of %d bytes, byte %d: %d", all ? "_all" : "", len, i,
                       mem[SLOTS * 8 + i]);
            MPI_OK(MPI_Win_unlock(me, win));
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        }
    }
    free(src);
}

/* Concurrent small accumulates from every rank: exact sums, completed by
 * flush, unlock and fence. */
static void sums(MPI_Win win, unsigned char *mem)
{
    int n = t_size;
    long one = 1, *l = (long *)mem;
    for (int i = 0; i < 64; i++)
        l[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < n; t++)
        for (int i = 0; i < 500; i++)
            MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, t, 8 * (i % 64), 1, MPI_LONG, MPI_SUM, win));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Win_unlock_all(win));
    for (int t = 0; t < n; t++) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
        for (int i = 0; i < 300; i++)
            MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, t, 8 * (i % 64), 1, MPI_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(t, win));
    }
    MPI_OK(MPI_Win_fence(0, win));
    for (int t = 0; t < n; t++)
        for (int i = 0; i < 200; i++)
            MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG, t, 8 * (i % 64), 1, MPI_LONG, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    /* Per slot: 500/64, 300/64, 200/64 rounded by slot, times n origins. */
    for (int i = 0; i < 64; i++) {
        long want = (long)n * ((500 / 64 + (i < 500 % 64)) + (300 / 64 + (i < 300 % 64)) +
                               (200 / 64 + (i < 200 % 64)));
        CHECKF(l[i] == want, "sum slot %d: %ld, want %ld", i, l[i], want);
    }
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void window(MPI_Win win, unsigned char *mem)
{
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    memset(mem, 0, SIZE);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    small_puts(win, mem);
    ordering(win);
    flushes(win, mem);
    big_batch(win, mem);
    flush_local_large(win, mem);
    sums(win, mem);
}

/* A dynamic window: a put to an address the target never attached is refused
 * there; the flush reports it, and the epoch's other puts land. */
static void refused(void)
{
    int me = t_rank, n = t_size, right = (me + 1) % n;
    long *part = calloc(64, sizeof(long)), v = 42, back = 0;
    MPI_Aint addr, *addrs = malloc(n * sizeof(MPI_Aint));
    MPI_Win win;
    if (n < 2) {
        free(part);
        free(addrs);
        return;
    }
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Win_attach(win, part, 64 * sizeof(long)));
    MPI_OK(MPI_Get_address(part, &addr));
    MPI_OK(MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < 10; i++)
        MPI_OK(MPI_Put(&v, 1, MPI_LONG, right, addrs[right] + i * 8, 1, MPI_LONG, win));
    MPI_OK(MPI_Put(&v, 1, MPI_LONG, right, addrs[right] + 4096 * 64, 1, MPI_LONG, win));
    for (int i = 10; i < 20; i++)
        MPI_OK(MPI_Put(&v, 1, MPI_LONG, right, addrs[right] + i * 8, 1, MPI_LONG, win));
    EXPECT_CLASS(MPI_Win_flush(right, win), MPI_ERR_RMA_RANGE);
    MPI_OK(MPI_Win_flush(right, win)); /* reported once */
    MPI_OK(MPI_Get(&back, 1, MPI_LONG, right, addrs[right] + 19 * 8, 1, MPI_LONG, win));
    MPI_OK(MPI_Win_flush(right, win));
    CHECKF(back == 42, "the put after the refused one: %ld", back);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < 20; i++)
        CHECKF(part[i] == 42, "dynamic slot %d: %ld", i, part[i]);
    MPI_OK(MPI_Win_detach(win, part));
    MPI_OK(MPI_Win_free(&win));
    free(part);
    free(addrs);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    unsigned char *mem = NULL;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(SIZE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    window(win, mem);
    MPI_OK(MPI_Win_free(&win));

    unsigned char *own = calloc(SIZE, 1);
    MPI_OK(MPI_Win_create(own, SIZE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    window(win, own);
    MPI_OK(MPI_Win_free(&win));
    free(own);

    refused();

    if (t_rank == 0)
        printf("OK batch\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
