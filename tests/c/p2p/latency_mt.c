/* latency_mt.c - the shape of OSU's osu_latency_mt: 2 ranks at
 * MPI_THREAD_MULTIPLE, each with THREADS threads; thread t of rank 0
 * ping-pongs with thread t of rank 1 on tag t, every size from 1 byte to
 * 4 MiB, checking every byte.  Rank 0 prints the half round trip per size
 * (all threads at once), so a collapse at some size shows in the output;
 * the program checks the data and a clean finish, not the times.
 *
 * Usage: latency_mt [iterations per size] [threads] (default 20, 4)
 * Prints "OK latency_mt" on rank 0. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS_MAX 8
static int nthreads = 4;
#define MAX (4L << 20)

static int rank, iters;

static unsigned char pat(long i, int t, int k)
{
    return (unsigned char)(i * 17 + t * 31 + k * 7);
}

static void die(const char *what, int t, long size)
{
    fprintf(stderr, "FAIL latency_mt: %s (thread %d, size %ld)\n", what, t, size);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void *run(void *arg)
{
    int t = (int)(long)arg;
    unsigned char *buf = malloc(MAX);
    if (!buf)
        die("out of memory", t, 0);
    for (long size = 1; size <= MAX; size *= 2) {
        /* Every byte is checked on the first and the last round trip; the rounds in
         * between echo the same bytes (checking each would time the check). */
        if (rank == 0)
            for (long i = 0; i < size; i++)
                buf[i] = pat(i, t, (int)size);
        double t0 = MPI_Wtime();
        for (int k = 0; k < iters; k++) {
            if (rank == 0) {
                MPI_Send(buf, (int)size, MPI_BYTE, 1, t, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_BYTE, 1, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_BYTE, 0, t, MPI_COMM_WORLD);
            }
            if (rank == 0 && (k == 0 || k == iters - 1))
                for (long i = 0; i < size; i++)
                    if (buf[i] != pat(i, t, (int)size))
                        die("wrong byte", t, size);
        }
        if (rank == 0 && t == 0 && size >= 65536)
            printf("latency_mt: %8ld bytes %10.1f us\n", size,
                   (MPI_Wtime() - t0) / iters / 2 * 1e6);
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE)
        die("MPI_THREAD_MULTIPLE not provided", -1, 0);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2)
        die("needs 2 ranks", -1, 0);
    iters = argc > 1 ? atoi(argv[1]) : 20;
    nthreads = argc > 2 ? atoi(argv[2]) : 4;
    if (nthreads < 1 || nthreads > THREADS_MAX || iters < 1)
        die("bad arguments", -1, 0);
    double t0 = MPI_Wtime();
    pthread_t th[THREADS_MAX];
    for (long t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, run, (void *)t);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("latency_mt: %d threads x %d iterations per size, %.3f s\n", nthreads, iters,
               MPI_Wtime() - t0);
        printf("OK latency_mt\n");
    }
    MPI_Finalize();
    return 0;
}
