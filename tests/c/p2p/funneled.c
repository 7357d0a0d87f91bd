/* funneled.c - MPI_THREAD_FUNNELED: the thread that initialized MPI owns it.
 * A second thread calling MPI gets an error (MPI_ERR_OTHER, with
 * MPI_ERRORS_RETURN) instead of racing with the main thread, and the main
 * thread's communication, in flight meanwhile, is not disturbed.  madmpi
 * reaches the engine without a lock at this level; MPICH does not check, so
 * the error is checked for madmpi only.  Exactly 2 ranks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <pthread.h>

static int thread_rc = MPI_SUCCESS;

static void *intruder(void *p)
{
    (void)p;
    int flag = 0;
    thread_rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                           MPI_STATUS_IGNORE);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    CHECK(provided == MPI_THREAD_FUNNELED);
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    CHECK(t_size == 2);
    int flag = 0;
    MPI_OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1);
    int peer = 1 - t_rank;

    /* A receive in flight while the other thread knocks. */
    int v = -1, w = 40 + t_rank;
    MPI_Request r;
    MPI_OK(MPI_Irecv(&v, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, &r));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, intruder, NULL) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    if (is_madmpi()) {
        int cls = -1;
        CHECKF(thread_rc != MPI_SUCCESS, "MPI_Iprobe from a second thread at FUNNELED succeeded");
        MPI_OK(MPI_Error_class(thread_rc, &cls));
        CHECKF(cls == MPI_ERR_OTHER, "error class %d, expected MPI_ERR_OTHER", cls);
    }

    MPI_OK(MPI_Send(&w, 1, MPI_INT, peer, 7, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(v == 40 + peer);
    for (int i = 0; i < 100; i++) {
        int a = i, b = -1;
        MPI_OK(MPI_Sendrecv(&a, 1, MPI_INT, peer, 8, &b, 1, MPI_INT, peer, 8, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
        CHECK(b == i);
    }
    t_done("funneled");
    return 0;
}
