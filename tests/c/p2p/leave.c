/* leave.c - a small non-blocking send whose request is complete at once
 * (madmpi's aggreg strategy copies it into the packet being built) must still
 * leave at the sender's next MPI call: MPI_Wait, MPI_Test and MPI_Waitall that
 * find the request complete, or an MPI_Irecv posted after it, hand the packet
 * to the transport, even if the sender then makes no MPI call for a long time.
 *
 * Rank 0 sends message k (k = 0..3), completes it with MPI_Wait, MPI_Test or
 * MPI_Waitall (k = 3: posts an MPI_Irecv first, and completes both after the
 * pause), then sleeps PAUSE seconds without calling MPI.  Rank 1 notes when
 * each message arrives: message k must arrive about k * PAUSE seconds after
 * the start, not when rank 0 next calls MPI.  The margins are seconds where
 * the event takes microseconds.  Exactly 2 ranks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <time.h>

#define PAUSE 1.5
#define MARGIN 1.0

static void pause_without_mpi(double secs)
{
    struct timespec ts;
    ts.tv_sec = (time_t)secs;
    ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    if (t_rank == 0) {
        for (int k = 0; k < 4; k++) {
            int v = 100 + k;
            MPI_Request r;
            MPI_OK(MPI_Isend(&v, 1, MPI_INT, 1, k, MPI_COMM_WORLD, &r));
            if (k == 3) {
                int reply = -1;
                MPI_Request rs[2] = {r, MPI_REQUEST_NULL};
                MPI_OK(MPI_Irecv(&reply, 1, MPI_INT, 1, 99, MPI_COMM_WORLD,
                                 &rs[1]));
                pause_without_mpi(PAUSE);
                MPI_OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
                CHECKF(reply == 7, "reply %d", reply);
                continue;
            }
            if (k == 0) {
                MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            } else if (k == 1) {
                int flag = 0;
                while (!flag)
                    MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            } else {
                MPI_OK(MPI_Waitall(1, &r, MPI_STATUSES_IGNORE));
            }
            pause_without_mpi(PAUSE);
        }
    } else {
        for (int k = 0; k < 4; k++) {
            int v = -1;
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, 0, k, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
            double at = MPI_Wtime() - t0;
            CHECKF(v == 100 + k, "message %d carried %d", k, v);
            CHECKF(at < k * PAUSE + MARGIN,
                   "message %d arrived %.2f s after the start, expected about "
                   "%.2f s: it waited for the sender's next MPI call",
                   k, at, k * PAUSE);
        }
        int reply = 7;
        MPI_OK(MPI_Send(&reply, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
    }
    t_done("leave");
    return 0;
}
