/* bsend_threads.c - buffered sends from several threads (MPI_THREAD_MULTIPLE)
 * filling the attached buffer, round after round.  Rank 0's threads each post
 * NMSG large (rendezvous) MPI_Ibsend on their own tag, rank 1's threads
 * receive them; after the threads are joined, a barrier.  The buffer holds
 * exactly the messages of one round (MPI_Pack_size + MPI_BSEND_OVERHEAD
 * each), so every round needs all the room of the previous one: the
 * receiver has every message of it, and the barrier says so.  Before the fix
 * the receiver's notices that it had the data could still wait in rank 0's
 * input when the next round began, and MPI_Ibsend failed with MPI_ERR_BUFFER
 * (found by MPICH's threads/pt2pt/mt_ibsendirecv_huge).  Exactly 2 ranks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <pthread.h>

#define NTHR 4
#define NMSG 4
#define ROUNDS 20
#define LEN (2 * 1024 * 1024)

static int round_no;

struct targ {
    int id;
    unsigned char *buf; /* NMSG messages of LEN bytes */
};

static void *worker(void *p)
{
    struct targ *a = p;
    MPI_Request r[NMSG];
    for (int m = 0; m < NMSG; m++) {
        unsigned char *b = a->buf + (size_t)m * LEN;
        unsigned seed = (unsigned)((round_no * NTHR + a->id) * NMSG + m);
        if (t_rank == 0) {
            fill(b, LEN, seed, 7);
            MPI_OK(MPI_Ibsend(b, LEN, MPI_BYTE, 1, a->id, MPI_COMM_WORLD, &r[m]));
        } else {
            MPI_OK(MPI_Irecv(b, LEN, MPI_BYTE, 0, a->id, MPI_COMM_WORLD, &r[m]));
        }
    }
    MPI_OK(MPI_Waitall(NMSG, r, MPI_STATUSES_IGNORE));
    if (t_rank == 1) {
        for (int m = 0; m < NMSG; m++) {
            unsigned seed = (unsigned)((round_no * NTHR + a->id) * NMSG + m);
            CHECKF(verify(a->buf + (size_t)m * LEN, LEN, seed, 7) < 0,
                   "round %d thread %d message %d", round_no, a->id, m);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "bsend_threads"))
        return 0;
    CHECK(t_size == 2);
    int ps = 0;
    MPI_OK(MPI_Pack_size(LEN, MPI_BYTE, MPI_COMM_WORLD, &ps));
    int bsize = NTHR * NMSG * (ps + MPI_BSEND_OVERHEAD);
    unsigned char *bbuf = xmalloc((size_t)bsize);
    MPI_OK(MPI_Buffer_attach(bbuf, bsize));
    struct targ args[NTHR];
    for (int i = 0; i < NTHR; i++) {
        args[i].id = i;
        args[i].buf = xmalloc((size_t)NMSG * LEN);
    }
    for (round_no = 0; round_no < ROUNDS; round_no++) {
        pthread_t th[NTHR];
        for (int i = 0; i < NTHR; i++)
            CHECK(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
        for (int i = 0; i < NTHR; i++)
            CHECK(pthread_join(th[i], NULL) == 0);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    void *det = NULL;
    int dsize = 0;
    MPI_OK(MPI_Buffer_detach(&det, &dsize));
    CHECK(det == bbuf && dsize == bsize);
    for (int i = 0; i < NTHR; i++)
        free(args[i].buf);
    free(bbuf);
    t_done("bsend_threads");
    return 0;
}
