/* part_threads.c - partitioned communication at MPI_THREAD_MULTIPLE: on each rank of a ring,
 * four threads make the partitions of the send ready (each its own interleaved share, in
 * reverse order) while four others wait for the partitions of the receive with MPI_Parrived
 * and check their bytes; the receive is cut in a different number of partitions. Rounds
 * repeat.
 */
#include "../p2p/common.h"
#include <pthread.h>

enum { SP = 16, SC = 1000, RP = 8, RC = SP * SC / RP, T = 4, ROUNDS = 4 };

static int next_r, prev_r;
static long *sb, *rb;
static MPI_Request sreq, rreq;
static int round_k;

static long val(int from, int k, long i)
{
    return from * 1000003L + k * 7919L + i * 31L + 1;
}

static void *readier(void *arg)
{
    int t = (int)(long)arg;
    for (int p = SP - 1 - t; p >= 0; p -= T)
        MPI_OK(MPI_Pready(p, sreq));
    return NULL;
}

static void *waiter(void *arg)
{
    int t = (int)(long)arg;
    for (int p = t; p < RP; p += T) {
        int flag = 0;
        while (!flag)
            MPI_OK(MPI_Parrived(rreq, p, &flag));
        for (long i = (long)p * RC; i < (long)(p + 1) * RC; i++)
            CHECKF(rb[i] == val(prev_r, round_k, i), "round %d partition %d long %ld", round_k, p,
                   i);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    next_r = (t_rank + 1) % t_size;
    prev_r = (t_rank + t_size - 1) % t_size;
    sb = xmalloc(sizeof(long) * SP * SC);
    rb = xmalloc(sizeof(long) * SP * SC);
    MPI_OK(MPI_Psend_init(sb, SP, SC, MPI_LONG, next_r, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq));
    MPI_OK(MPI_Precv_init(rb, RP, RC, MPI_LONG, prev_r, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq));
    for (round_k = 0; round_k < ROUNDS; round_k++) {
        for (long i = 0; i < SP * SC; i++)
            sb[i] = val(t_rank, round_k, i);
        memset(rb, 0, sizeof(long) * SP * SC);
        MPI_OK(MPI_Start(&rreq));
        MPI_OK(MPI_Start(&sreq));
        pthread_t th[2 * T];
        for (long t = 0; t < T; t++) {
            CHECK(pthread_create(&th[t], NULL, readier, (void *)t) == 0);
            CHECK(pthread_create(&th[T + t], NULL, waiter, (void *)t) == 0);
        }
        for (int t = 0; t < 2 * T; t++)
            CHECK(pthread_join(th[t], NULL) == 0);
        MPI_OK(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&rreq, MPI_STATUS_IGNORE));
        for (long i = 0; i < SP * SC; i++)
            CHECKF(rb[i] == val(prev_r, round_k, i), "round %d long %ld", round_k, i);
    }
    MPI_OK(MPI_Request_free(&sreq));
    MPI_OK(MPI_Request_free(&rreq));
    free(sb);
    free(rb);
    t_done("part_threads");
    return 0;
}
