/* leave.c - a small non-blocking send whose request is complete at once
 * (madmpi's aggreg strategy copies it into the packet being built) must still
 * leave at the sender's next MPI call: MPI_Wait, MPI_Test and MPI_Waitall that
 * find the request complete, or an MPI_Irecv posted after it, hand the packet
 * to the transport, even if the sender then makes no MPI call at all.
 *
 * Rank 0 sends message k (k = 0..3), completes it with MPI_Wait, MPI_Test or
 * MPI_Waitall (k = 3: posts an MPI_Irecv instead, and completes both later),
 * then waits, without calling MPI, until rank 1 says through a file that the
 * message arrived.  A message held back until the sender's next MPI call
 * never arrives while the sender waits: after WAIT_S seconds the test fails
 * (a detector of that failure, not a speed limit: the message takes
 * microseconds).  Exactly 2 ranks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define WAIT_S 20

static char dir[64];

static void flag_path(char *p, size_t n, int k)
{
    snprintf(p, n, "%s/%d", dir, k);
}

static void cleanup(void)
{
    char p[96];
    for (int k = 0; k < 4; k++) {
        flag_path(p, sizeof p, k);
        unlink(p);
    }
    rmdir(dir);
}

/* Wait for rank 1's flag for message k, without any MPI call. */
static void wait_for_flag(int k)
{
    char p[96];
    flag_path(p, sizeof p, k);
    struct timespec ms = {0, 1000000};
    for (long i = 0; i < WAIT_S * 1000L; i++) {
        if (access(p, F_OK) == 0)
            return;
        nanosleep(&ms, NULL);
    }
    cleanup();
    FAILF("message %d did not arrive while the sender made no MPI call: it "
          "waited for the sender's next one",
          k);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    if (t_rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/madmpi-leave-XXXXXX",
                 tmp && strlen(tmp) < 32 ? tmp : "/tmp");
        CHECK(mkdtemp(dir) != NULL);
    }
    MPI_OK(MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD));
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
                wait_for_flag(k);
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
            wait_for_flag(k);
        }
    } else {
        for (int k = 0; k < 4; k++) {
            int v = -1;
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, 0, k, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
            CHECKF(v == 100 + k, "message %d carried %d", k, v);
            char p[96];
            flag_path(p, sizeof p, k);
            int fd = open(p, O_CREAT | O_WRONLY, 0600);
            CHECKF(fd >= 0, "cannot create %s", p);
            close(fd);
        }
        int reply = 7;
        MPI_OK(MPI_Send(&reply, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0)
        cleanup();
    t_done("leave");
    return 0;
}
