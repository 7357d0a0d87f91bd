/* traffic.c - continuous traffic on every rank, for the fault tests (tests/tests/faults.rs
 * and tests/tests/multihost.rs).
 *
 * Usage: traffic [iterations [delay_ms [hold]]]
 *   iterations  0 (default): run until killed; N: stop after N rounds and finalize
 *   delay_ms    sleep this long before MPI_Init (lets a test reach the PMI port first)
 *   hold        after the 20th round, rank 0 reads its stdin to the end before going on
 *               (the others wait for it): the job lives until the test closes the stdin
 *
 * Each round, every rank sends a message to its right neighbour and receives one from its left
 * (MPI_Sendrecv, sizes cycling from 8 bytes to 256 KiB, so eager and rendezvous transfers are
 * both in flight), checks it, and then the other way round with a small message. Point-to-point
 * only, so that it runs wherever the library's sends and receives do.
 *
 * Prints, flushed at once:
 *   "rank R pid P jobid J pmi_port X"   after MPI_Init (X: PMI_PORT or "-")
 *   "traffic R"                         after the 20th round (traffic is flowing)
 *   "OK traffic"                        on rank 0 when a finite run ends well
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BYTES (256 * 1024)

static unsigned char pattern(long round, int from, size_t i)
{
    return (unsigned char)(round * 31 + from * 7 + (long)i);
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 0;
    long delay_ms = argc > 2 ? atol(argv[2]) : 0;
    int hold = argc > 3 && strcmp(argv[3], "hold") == 0;
    if (delay_ms > 0) {
        struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }

    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *jobid = getenv("MADMPI_JOBID");
    const char *port = getenv("PMI_PORT");
    printf("rank %d pid %ld jobid %s pmi_port %s\n", rank, (long)getpid(),
           jobid && *jobid ? jobid : "-", port && *port ? port : "-");
    fflush(stdout);

    unsigned char *out = malloc(MAX_BYTES);
    unsigned char *in = malloc(MAX_BYTES);
    if (out == NULL || in == NULL) {
        fprintf(stderr, "traffic: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long sum = 0;
    for (long round = 0; iterations == 0 || round < iterations; round++) {
        size_t n = (size_t)8 << (round % 16); /* 8 B .. 256 KiB */
        for (size_t i = 0; i < n; i++)
            out[i] = pattern(round, rank, i);
        MPI_Status st;
        MPI_Sendrecv(out, (int)n, MPI_BYTE, right, 1, in, (int)n, MPI_BYTE, left, 1,
                     MPI_COMM_WORLD, &st);
        for (size_t i = 0; i < n; i++) {
            if (in[i] != pattern(round, left, i)) {
                fprintf(stderr, "traffic: rank %d round %ld: byte %zu from %d is wrong\n",
                        rank, round, i, left);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        long mine = round + rank, back = -1;
        MPI_Sendrecv(&mine, 1, MPI_LONG, left, 2, &back, 1, MPI_LONG, right, 2,
                     MPI_COMM_WORLD, &st);
        if (back != round + right) {
            fprintf(stderr, "traffic: rank %d round %ld: got %ld from %d\n", rank, round,
                    back, right);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        sum += back + in[n - 1];
        if (round == 20) {
            printf("traffic %d\n", rank);
            fflush(stdout);
            if (hold && rank == 0)
                while (getchar() != EOF)
                    ;
        }
    }
    free(out);
    free(in);
    if (rank == 0) {
        printf("traffic: %ld rounds on %d ranks, checksum %ld\n", iterations, size, sum);
        printf("OK traffic\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
