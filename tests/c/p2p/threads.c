/* threads.c - MPI_THREAD_MULTIPLE: two threads per rank, each exchanging
 * many messages (small and rendezvous-sized) with its twin thread on the
 * partner rank, on its own tag, while the other thread does the same; then
 * both threads receive with MPI_ANY_TAG from a shared stream.  Exactly 2
 * ranks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <pthread.h>

#define ITERS 400
#define BIG (256 * 1024)

struct targ {
    int id;
};

static void *worker(void *p)
{
    int id = ((struct targ *)p)->id;
    int peer = 1 - t_rank;
    unsigned char *sb = xmalloc(BIG), *rb = xmalloc(BIG);
    for (int i = 0; i < ITERS; i++) {
        size_t n = (i % 40 == 3) ? BIG : (size_t)(1 + (i * 37 + id * 11) % 3000);
        fill(sb, n, (unsigned)(i * 2 + id), (unsigned)t_rank);
        MPI_Request r[2];
        MPI_Status st;
        MPI_OK(MPI_Irecv(rb, BIG, MPI_BYTE, peer, id, MPI_COMM_WORLD, &r[0]));
        if (i % 2)
            MPI_OK(MPI_Isend(sb, (int)n, MPI_BYTE, peer, id, MPI_COMM_WORLD, &r[1]));
        else
            MPI_OK(MPI_Issend(sb, (int)n, MPI_BYTE, peer, id, MPI_COMM_WORLD, &r[1]));
        MPI_OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&r[0], &st));
        int cnt = 0;
        MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
        CHECKF((size_t)cnt == n, "thread %d iter %d: %d bytes, expected %zu", id, i, cnt, n);
        CHECK(st.MPI_TAG == id && st.MPI_SOURCE == peer);
        CHECKF(verify(rb, n, (unsigned)(i * 2 + id), (unsigned)peer) < 0, "thread %d iter %d: data", id, i);
    }
    /* Blocking calls from both threads at once. */
    for (int i = 0; i < ITERS; i++) {
        int v = i * 10 + id, w = -1;
        if (t_rank == 0) {
            MPI_OK(MPI_Send(&v, 1, MPI_INT, peer, 100 + id, MPI_COMM_WORLD));
            MPI_OK(MPI_Recv(&w, 1, MPI_INT, peer, 100 + id, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            MPI_OK(MPI_Recv(&w, 1, MPI_INT, peer, 100 + id, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Send(&v, 1, MPI_INT, peer, 100 + id, MPI_COMM_WORLD));
        }
        CHECK(w == i * 10 + id);
    }
    free(sb);
    free(rb);
    return NULL;
}

/* Both threads take messages from one stream with MPI_ANY_TAG: together
 * they see every message exactly once. */
static int seen[2 * ITERS];
static void *taker(void *p)
{
    (void)p;
    for (int k = 0; k < ITERS; k++) {
        int v = -1;
        MPI_OK(MPI_Recv(&v, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v >= 0 && v < 2 * ITERS);
        __atomic_fetch_add(&seen[v], 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "threads"))
        return 0;
    CHECK(t_size == 2);
    pthread_t th[2];
    struct targ a[2] = {{0}, {1}};
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, worker, &a[i]) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    if (t_rank == 0) {
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&th[i], NULL, taker, NULL) == 0);
        for (int i = 0; i < 2; i++)
            CHECK(pthread_join(th[i], NULL) == 0);
        for (int v = 0; v < 2 * ITERS; v++)
            CHECKF(seen[v] == 1, "message %d seen %d times", v, seen[v]);
    } else {
        for (int v = 0; v < 2 * ITERS; v++)
            MPI_OK(MPI_Send(&v, 1, MPI_INT, 0, v % 7, MPI_COMM_WORLD));
    }

    int flag = 0;
    MPI_OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1);
    t_done("threads");
    return 0;
}
