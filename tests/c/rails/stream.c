/* stream.c - rank 0 streams large messages to rank 1 through a window of
 * non-blocking sends; rank 1 receives them one by one and checks every byte.
 * After a few untimed messages (the library learns its rails' rates from
 * them), rank 0 times the rest up to rank 1's final acknowledgement and
 * prints the bandwidth it saw.  Other ranks take no part.
 *
 * Usage: stream [timed messages] [bytes per message] [untimed messages]
 *        (default 12, 2 MiB, 2)
 * Prints on rank 0: "stream: <MB/s> MB/s" then "OK stream". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WINDOW 4

static unsigned char pattern(size_t i, int k)
{
    return (unsigned char)(i * 131u + (unsigned)k * 7u + (i >> 12));
}

static void fail(const char *what, int k)
{
    fprintf(stderr, "FAIL stream: %s (message %d)\n", what, k);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int timed = argc > 1 ? atoi(argv[1]) : 12;
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : (size_t)2 << 20;
    int untimed = argc > 3 ? atoi(argv[3]) : 2;
    int total = timed + untimed;
    if (size < 2 || timed < 1 || bytes < 1 || untimed < 0)
        fail("needs 2 ranks and positive sizes", -1);

    double t0 = 0;
    if (rank == 0) {
        unsigned char *buf[WINDOW];
        MPI_Request req[WINDOW];
        for (int w = 0; w < WINDOW; w++) {
            buf[w] = malloc(bytes);
            if (!buf[w])
                fail("out of memory", -1);
            req[w] = MPI_REQUEST_NULL;
        }
        for (int k = 0; k < total; k++) {
            int w = k % WINDOW;
            if (k == untimed) {
                /* The untimed ones are in before the clock starts. */
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                t0 = MPI_Wtime();
            }
            MPI_Wait(&req[w], MPI_STATUS_IGNORE);
            for (size_t i = 0; i < bytes; i++)
                buf[w][i] = pattern(i, k);
            MPI_Isend(buf[w], (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double s = MPI_Wtime() - t0;
        printf("stream: %.2f MB/s\n", (double)timed * (double)bytes / s / 1e6);
        printf("OK stream\n");
        for (int w = 0; w < WINDOW; w++)
            free(buf[w]);
    } else if (rank == 1) {
        unsigned char *buf = malloc(bytes);
        if (!buf)
            fail("out of memory", -1);
        for (int k = 0; k < total; k++) {
            if (k == untimed)
                MPI_Send(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            MPI_Status st;
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
            int n;
            MPI_Get_count(&st, MPI_BYTE, &n);
            if ((size_t)n != bytes)
                fail("wrong size", k);
            for (size_t i = 0; i < bytes; i++)
                if (buf[i] != pattern(i, k))
                    fail("wrong byte", k);
        }
        MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
