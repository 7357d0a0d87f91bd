/* ring.c - a token travels around the ring of all ranks N times; every rank
 * adds one to it on each pass.
 *
 * Rank 0 starts the token at 0; after N laps it must equal N * size.  Each
 * rank also checks the value it receives on every lap (it is predictable:
 * lap * size + rank).  With one rank the token is sent to self with
 * MPI_Isend and received with MPI_Recv, which must not deadlock.
 *
 * Usage: ring [laps]   (default 10)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_TOKEN 7

int main(int argc, char **argv)
{
    int rank, size;
    int laps = 10;
    int failed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        laps = atoi(argv[1]);
    if (laps < 1)
        laps = 1;

    int next = (rank + 1) % size;
    int prev = (rank + size - 1) % size;
    long token = 0;

    for (int lap = 0; lap < laps; lap++) {
        long expected = (long)lap * size + rank;
        if (size > 1 && (rank != 0 || lap != 0)) {
            /* Rank 0 receives, from lap 1 on, the token that completed the
             * previous lap; the others receive it on every lap. */
            MPI_Status st;
            MPI_Recv(&token, 1, MPI_LONG, prev, TAG_TOKEN, MPI_COMM_WORLD, &st);
            if (st.MPI_SOURCE != prev || st.MPI_TAG != TAG_TOKEN) {
                fprintf(stderr, "ring: rank %d: status says source %d tag %d, "
                        "expected %d/%d\n", rank, st.MPI_SOURCE, st.MPI_TAG,
                        prev, TAG_TOKEN);
                failed = 1;
            }
        }
        if (token != expected) {
            fprintf(stderr, "ring: rank %d lap %d: token %ld, expected %ld\n",
                    rank, lap, token, expected);
            failed = 1;
        }
        token++;
        MPI_Request req;
        MPI_Isend(&token, 1, MPI_LONG, next, TAG_TOKEN, MPI_COMM_WORLD, &req);
        if (size == 1) {
            /* Send to self: the matching receive must be posted before we
             * wait on the send, or a synchronous-mode send would hang. */
            long back;
            MPI_Recv(&back, 1, MPI_LONG, 0, TAG_TOKEN, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            token = back;
        } else {
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    }
    if (rank == 0 && size > 1) {
        /* The last lap's token comes home. */
        MPI_Recv(&token, 1, MPI_LONG, prev, TAG_TOKEN, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    if (rank == 0) {
        long want = (long)laps * size;
        if (token != want) {
            fprintf(stderr, "ring: final token %ld, expected %ld\n", token,
                    want);
            failed = 1;
        } else {
            printf("ring: token %ld after %d laps over %d ranks\n", token,
                   laps, size);
        }
    }

    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any_failed)
        printf("ring: OK (%d ranks)\n", size);
    MPI_Finalize();
    return any_failed ? 1 : 0;
}
