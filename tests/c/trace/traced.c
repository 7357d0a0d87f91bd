/* traced.c - a small, self-checking 2-rank program for the trace tests (tests/tests/trace.rs):
 * small eager messages, one rendezvous-size message, a 32 KiB eager one, non-blocking calls
 * with MPI_Waitall and MPI_Test, a burst of small non-blocking sends, a longer one of 1 KiB
 * sends, and collectives.
 * Optional argument "abort": rank 0 calls MPI_Abort after the traffic (the trace must still be
 * written).
 * Rank 0 prints "OK traced" at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (1 << 20) /* above every driver's eager threshold: rendezvous */

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
            MPI_Abort(MPI_COMM_WORLD, 3);                                      \
        }                                                                      \
    } while (0)

/* `n` bytes of a pattern from rank 0 to rank 1 with `tag`, sent once rank 1 has posted its
 * receive (a 0-byte message with tag + 100 says so), and checked. */
static void posted_transfer(int rank, unsigned char *buf, int n, int tag)
{
    if (rank == 0) {
        for (int i = 0; i < n; i++)
            buf[i] = (unsigned char)(i * 13 + 5);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, tag + 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
    } else {
        MPI_Request r;
        memset(buf, 0, (size_t)n);
        MPI_Irecv(buf, n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r);
        MPI_Send(NULL, 0, MPI_BYTE, 0, tag + 100, MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++)
            CHECK(buf[i] == (unsigned char)(i * 13 + 5));
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2);
    int peer = 1 - rank;

    /* Small eager messages, tags 1 and 2. */
    int small[4] = {rank, 10 * rank, 100 * rank, 7};
    int got[4] = {0};
    if (rank == 0) {
        MPI_Send(small, 4, MPI_INT, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(got, 4, MPI_INT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(got[0] == 1 && got[1] == 10 && got[3] == 7);
    } else {
        MPI_Recv(got, 4, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(got[0] == 0 && got[3] == 7);
        MPI_Send(small, 4, MPI_INT, peer, 2, MPI_COMM_WORLD);
    }

    /* One rendezvous message from rank 0 to rank 1, tag 3, its receive posted first. */
    unsigned char *big = malloc(BIG);
    CHECK(big != NULL);
    posted_transfer(rank, big, BIG, 3);

    /* A 32 KiB eager message from rank 0 to rank 1, tag 5, sent once rank 1 has posted its
     * receive (over TCP it is read straight into the receive buffer). */
    posted_transfer(rank, big, 32 << 10, 5);

    /* Non-blocking both ways, tag 4. */
    MPI_Request reqs[2];
    double out = rank + 0.5, in = -1;
    MPI_Irecv(&in, 1, MPI_DOUBLE, peer, 4, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&out, 1, MPI_DOUBLE, peer, 4, MPI_COMM_WORLD, &reqs[1]);
    int flag = 0;
    MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    CHECK(in == peer + 0.5);

    /* A burst of small non-blocking sends, tags 10..13: the aggreg strategy packs them into
     * one packet. */
    int burst[4], burst_in[4];
    MPI_Request breqs[8];
    for (int i = 0; i < 4; i++) {
        burst[i] = 100 * rank + i;
        MPI_Irecv(&burst_in[i], 1, MPI_INT, peer, 10 + i, MPI_COMM_WORLD, &breqs[i]);
    }
    for (int i = 0; i < 4; i++)
        MPI_Isend(&burst[i], 1, MPI_INT, peer, 10 + i, MPI_COMM_WORLD, &breqs[4 + i]);
    MPI_Waitall(8, breqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 4; i++)
        CHECK(burst_in[i] == 100 * peer + i);

    /* A longer burst, tags 20..43 from rank 0: 24 KiB in 1 KiB messages, more than one
     * shared-memory packet holds; under aggreg the first packet leaves as soon as it is full,
     * during the burst. */
    enum { NLONG = 24, LONG_INTS = 256 };
    int *lb = malloc(sizeof(int) * NLONG * LONG_INTS);
    MPI_Request lreqs[NLONG];
    CHECK(lb != NULL);
    for (int i = 0; i < NLONG * LONG_INTS; i++)
        lb[i] = rank == 0 ? i * 7 + 3 : -1;
    for (int i = 0; i < NLONG; i++) {
        if (rank == 0)
            MPI_Isend(lb + i * LONG_INTS, LONG_INTS, MPI_INT, peer, 20 + i, MPI_COMM_WORLD,
                      &lreqs[i]);
        else
            MPI_Irecv(lb + i * LONG_INTS, LONG_INTS, MPI_INT, peer, 20 + i, MPI_COMM_WORLD,
                      &lreqs[i]);
    }
    MPI_Waitall(NLONG, lreqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < NLONG * LONG_INTS; i++)
        CHECK(lb[i] == i * 7 + 3);
    free(lb);

    /* Collectives. */
    int one = rank + 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == 3);
    int root_val = rank == 0 ? 42 : 0;
    MPI_Bcast(&root_val, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(root_val == 42);
    MPI_Barrier(MPI_COMM_WORLD);

    if (argc > 1 && strcmp(argv[1], "abort") == 0 && rank == 0) {
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 5);
    }
    free(big);
    MPI_Finalize();
    if (rank == 0)
        printf("OK traced\n");
    return 0;
}
