/* ctx_threads.c - context-id agreements from several threads at once
 * (MPI_THREAD_MULTIPLE): each of NT threads creates and frees communicators
 * from its own duplicate of MPI_COMM_WORLD with MPI_Comm_create_group, and
 * between two of those duplicates MPI_COMM_SELF (an agreement over one
 * process) under a lock.  The threads drift apart from one process to the
 * other, so a process may duplicate MPI_COMM_SELF while another agreement of
 * its own waits for processes that wait for this thread's next
 * create_group: the one-process agreement must not wait for it.  Any number
 * of ranks. */
#define _POSIX_C_SOURCE 200809L
#include "coll.h"
#include <pthread.h>

#define NT 4
#define ITERS 40

static MPI_Comm parent[NT];
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *p)
{
    int id = *(int *)p;
    for (int i = 0; i < ITERS; i++) {
        MPI_Group g;
        MPI_Comm c, s;
        MPI_OK(MPI_Comm_group(parent[id], &g));
        MPI_OK(MPI_Comm_create_group(parent[id], g, id, &c));
        int n = 0, sum = 0, one = 1;
        MPI_OK(MPI_Comm_size(c, &n));
        CHECK(n == t_size);
        MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECKF(sum == t_size, "thread %d iteration %d: sum %d", id, i, sum);
        MPI_OK(MPI_Comm_free(&c));
        MPI_OK(MPI_Group_free(&g));

        CHECK(pthread_mutex_lock(&self_lock) == 0);
        MPI_OK(MPI_Comm_dup(MPI_COMM_SELF, &s));
        CHECK(pthread_mutex_unlock(&self_lock) == 0);
        MPI_OK(MPI_Comm_size(s, &n));
        CHECK(n == 1);
        MPI_OK(MPI_Barrier(s));
        MPI_OK(MPI_Comm_free(&s));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "ctx_threads"))
        return 0;
    for (int i = 0; i < NT; i++)
        MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &parent[i]));
    pthread_t th[NT];
    int ids[NT];
    for (int i = 0; i < NT; i++) {
        ids[i] = i;
        CHECK(pthread_create(&th[i], NULL, worker, &ids[i]) == 0);
    }
    for (int i = 0; i < NT; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    for (int i = 0; i < NT; i++)
        MPI_OK(MPI_Comm_free(&parent[i]));
    t_done("ctx_threads");
    return 0;
}
