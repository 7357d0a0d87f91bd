/* pingpong.c - latency and bandwidth between ranks 0 and 1.
 *
 * For each message size from 0 bytes to 1 MiB (powers of two), rank 0 sends
 * a message to rank 1, which sends it back; the half round-trip time is the
 * latency and size / latency the bandwidth.  Every message carries a pattern
 * that depends on the size and the iteration, and both ranks check every
 * byte they receive, so a lost, truncated or stale message is reported.
 * Ranks >= 2 take no part; with a single rank the program prints a note and
 * exits 0.
 *
 * Usage: pingpong [max_size_bytes]   (default 1048576)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_PING 1
#define TAG_PONG 2

static unsigned char pattern(size_t i, int size_log, int iter, int who)
{
    return (unsigned char)(i * 7u + (unsigned)size_log * 13u +
                           (unsigned)iter * 29u + (unsigned)who * 101u);
}

static void fill(unsigned char *buf, size_t n, int size_log, int iter, int who)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(i, size_log, iter, who);
}

/* Returns the index of the first wrong byte, or -1. */
static long check(const unsigned char *buf, size_t n, int size_log, int iter,
                  int who)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(i, size_log, iter, who))
            return (long)i;
    return -1;
}

int main(int argc, char **argv)
{
    int rank, size;
    long max_size = 1L << 20;
    int failed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        max_size = atol(argv[1]);
    if (max_size < 0)
        max_size = 0;

    if (size < 2) {
        printf("pingpong: needs at least 2 ranks, nothing to measure with %d\n",
               size);
        printf("pingpong: OK (%d ranks)\n", size);
        MPI_Finalize();
        return 0;
    }

    unsigned char *sbuf = malloc((size_t)max_size + 1);
    unsigned char *rbuf = malloc((size_t)max_size + 1);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "pingpong: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (rank == 0)
        printf("%10s %8s %12s %12s\n", "bytes", "iters", "latency_us",
               "MB/s");
    int size_log = 0;
    for (long n = 0; n <= max_size; n = (n == 0 ? 1 : n * 2), size_log++) {
        int iters = n <= 4096 ? 200 : (n <= 65536 ? 50 : 10);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int it = 0; it < iters && rank <= 1; it++) {
            MPI_Status st;
            int count;
            if (rank == 0) {
                fill(sbuf, (size_t)n, size_log, it, 0);
                MPI_Send(sbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)n, MPI_BYTE, 1, TAG_PONG, MPI_COMM_WORLD,
                         &st);
            } else {
                MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD,
                         &st);
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count != n) {
                fprintf(stderr, "pingpong: rank %d: size %ld iter %d: got %d "
                        "bytes\n", rank, n, it, count);
                failed = 1;
            }
            long bad = check(rbuf, (size_t)n, size_log, it, rank == 0 ? 1 : 0);
            if (bad >= 0) {
                fprintf(stderr, "pingpong: rank %d: size %ld iter %d: wrong "
                        "byte at offset %ld\n", rank, n, it, bad);
                failed = 1;
            }
            /* On an error keep going: the peer is waiting for this message. */
            if (rank == 1) {
                fill(sbuf, (size_t)n, size_log, it, 1);
                MPI_Send(sbuf, (int)n, MPI_BYTE, 0, TAG_PONG, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0 && !failed) {
            /* The pattern fill and check are inside the loop, so these
             * figures include them: this is a demonstration, bench/c/ has the
             * careful measurement. */
            double lat_us = t / iters / 2.0 * 1e6;
            double mbs = lat_us > 0.0 ? (double)n / lat_us : 0.0;
            printf("%10ld %8d %12.2f %12.1f\n", n, iters, lat_us, mbs);
        }
        /* Stop all sizes together if any rank saw an error. */
        int any = 0;
        MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            failed = 1;
            break;
        }
    }

    free(sbuf);
    free(rbuf);
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any_failed)
        printf("pingpong: OK (%d ranks)\n", size);
    MPI_Finalize();
    return any_failed ? 1 : 0;
}
