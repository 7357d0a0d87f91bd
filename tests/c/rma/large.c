/* large.c - large operations of one-byte elements on MPI_Win_create windows,
 * to every rank including the origin itself: the pattern of a lock (or
 * lock_all) epoch per operation with megabytes of MPI_BYTE / MPI_CHAR moved,
 * as contiguous-transfer benchmarks and large-accumulate stress programs do.
 *
 * - each origin in turn locks every target (itself first), puts 2 MiB of
 *   MPI_BYTE, gets them back and checks every byte, then XORs them away with
 *   an MPI_BXOR accumulate of MPI_INT (exclusive and shared locks, with and
 *   without MPI_MODE_NOCHECK);
 * - every rank adds 2 MiB of MPI_CHAR into rank 0's window with MPI_SUM
 *   under lock_all, MPI_Win_flush_local after each accumulate and
 *   MPI_Win_flush after each round, several rounds: the sums are exact;
 * - operations on the origin's own part with a strided target datatype, a
 *   get-accumulate, a fetch-and-op and a compare-and-swap, checked.
 *
 * (A contiguous target datatype of N one-byte elements was walked element by
 * element when the operation was cut into chunks: 2 million steps per 2 MiB
 * operation, which made such programs crawl on the active-message path.)
 * Any number of ranks. */
#include "../p2p/common.h"

#define BIG (2 * 1024 * 1024)
#define ROUNDS 4

static unsigned char pattern(int origin, int target, size_t i)
{
    return (unsigned char)(i * 7 + (size_t)origin * 31 + (size_t)target * 13 + 1);
}

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    unsigned char *mem, *buf, *back;
    MPI_OK(MPI_Alloc_mem(BIG, MPI_INFO_NULL, &mem));
    MPI_OK(MPI_Alloc_mem(BIG, MPI_INFO_NULL, &buf));
    back = malloc(BIG);
    CHECK(back != NULL);
    memset(mem, 0, BIG);
    MPI_Win win;
    MPI_OK(MPI_Win_create(mem, BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));

    /* Put, get back, XOR away: origins in turn (the others wait in a barrier,
     * serving the operations by their progress). */
    const int modes[4][2] = {{MPI_LOCK_EXCLUSIVE, 0},
                             {MPI_LOCK_EXCLUSIVE, MPI_MODE_NOCHECK},
                             {MPI_LOCK_SHARED, 0},
                             {MPI_LOCK_SHARED, MPI_MODE_NOCHECK}};
    for (int origin = 0; origin < n; origin++) {
        for (int t = 0; me == origin && t < n; t++) {
            int target = (me + t) % n;
            for (size_t i = 0; i < BIG; i++)
                buf[i] = pattern(me, target, i);
            for (int m = 0; m < 4; m++) {
                int lt = modes[m][0], a = modes[m][1];
                MPI_OK(MPI_Win_lock(lt, target, a, win));
                MPI_OK(MPI_Put(buf, BIG, MPI_BYTE, target, 0, BIG, MPI_BYTE, win));
                MPI_OK(MPI_Win_unlock(target, win));
                memset(back, 0, BIG);
                MPI_OK(MPI_Win_lock(lt, target, a, win));
                MPI_OK(MPI_Get(back, BIG, MPI_BYTE, target, 0, BIG, MPI_BYTE, win));
                MPI_OK(MPI_Win_unlock(target, win));
                for (size_t i = 0; i < BIG; i++)
                    CHECKF(back[i] == buf[i], "target %d mode %d byte %zu: %u, not %u", target,
                           m, i, back[i], buf[i]);
                MPI_OK(MPI_Win_lock(lt, target, a, win));
                MPI_OK(MPI_Accumulate(buf, BIG / 4, MPI_INT, target, 0, BIG / 4, MPI_INT,
                                      MPI_BXOR, win));
                MPI_OK(MPI_Win_unlock(target, win));
                MPI_OK(MPI_Win_lock(lt, target, a, win));
                MPI_OK(MPI_Get(back, BIG, MPI_BYTE, target, 0, BIG, MPI_BYTE, win));
                MPI_OK(MPI_Win_unlock(target, win));
                for (size_t i = 0; i < BIG; i++)
                    CHECKF(back[i] == 0, "target %d mode %d byte %zu not XORed away: %u",
                           target, m, i, back[i]);
            }
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* Large MPI_CHAR sums from every rank into rank 0, flush_local after each
     * accumulate, flush after each round. */
    for (size_t i = 0; i < BIG; i++)
        buf[i] = (unsigned char)((i + (size_t)me) % 5);
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int r = 0; r < ROUNDS; r++) {
        for (int size = BIG / 8; size <= BIG; size *= 2) {
            MPI_OK(MPI_Accumulate(buf, size, MPI_CHAR, 0, 0, size, MPI_CHAR, MPI_SUM, win));
            MPI_OK(MPI_Win_flush_local(0, win));
        }
        MPI_OK(MPI_Win_flush(0, win));
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (size_t i = 0; i < BIG; i++) {
            /* Byte i received, per round, one accumulate of each size that covers it. */
            int covers = 0;
            for (size_t size = BIG / 8; size <= BIG; size *= 2)
                covers += i < size;
            unsigned sum = 0;
            for (int o = 0; o < n; o++)
                sum += (unsigned)(ROUNDS * covers) * (unsigned)((i + (size_t)o) % 5);
            CHECKF(mem[i] == (unsigned char)sum, "byte %zu: %u, not %u", i, mem[i],
                   (unsigned char)sum);
        }
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* The origin's own part: a strided target, get-accumulate, fetch-and-op,
     * compare-and-swap. */
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    int *ints = (int *)(void *)mem;
    for (int i = 0; i < 128; i++)
        ints[i] = i;
    MPI_OK(MPI_Win_unlock(me, win));
    MPI_Datatype every_other;
    MPI_OK(MPI_Type_vector(16, 1, 2, MPI_INT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    int src[16], res[16], one = 1, old = -1, cmp = 100, swp = 1000, was = -1;
    for (int i = 0; i < 16; i++)
        src[i] = 1000 + i;
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    MPI_OK(MPI_Put(src, 16, MPI_INT, me, 0, 1, every_other, win));
    MPI_OK(MPI_Get_accumulate(src, 16, MPI_INT, res, 16, MPI_INT, me, 32 * 4, 1, every_other,
                              MPI_SUM, win));
    MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_INT, me, 4 * 100, MPI_SUM, win));
    MPI_OK(MPI_Win_flush(me, win));
    MPI_OK(MPI_Compare_and_swap(&swp, &cmp, &was, MPI_INT, me, 4 * 100, win));
    MPI_OK(MPI_Win_unlock(me, win));
    for (int i = 0; i < 16; i++) {
        CHECKF(ints[2 * i] == 1000 + i && ints[2 * i + 1] == 2 * i + 1, "put element %d", i);
        CHECKF(res[i] == 32 + 2 * i, "get-accumulate result %d: %d", i, res[i]);
        CHECKF(ints[32 + 2 * i] == 32 + 2 * i + 1000 + i, "accumulated element %d", i);
    }
    CHECKF(old == 100 && was == 101 && ints[100] == 101, "fetch-and-op %d, cas %d, now %d", old,
           was, ints[100]);
    MPI_OK(MPI_Type_free(&every_other));

    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Free_mem(mem));
    MPI_OK(MPI_Free_mem(buf));
    free(back);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK large\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
