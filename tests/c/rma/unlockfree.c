/* unlockfree.c - windows freed right after passive-target epochs (MPICH's rmazero): every rank
 * opens and closes exclusive lock epochs on rank 0 of a fresh MPI_Win_create window (after a
 * fence epoch), then all free it and make progress with no window. Nothing answers an unlock,
 * and MPI_Win_free's barrier can overtake it (shared-memory collectives): the free must wait
 * for the unlocks sent to this process, or one arrives for a window that no longer exists (or
 * for the next one that took its number). The harness checks stderr for dropped chunks. Over
 * MPI_COMM_WORLD and over it in reverse order; any number of ranks. */
#include "../p2p/common.h"

int main(int argc, char **argv)
{
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    int me = t_rank, n = t_size;
    MPI_Comm rev;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, n - me, &rev));
    int buf[256] = {0}, src[4] = {1, 2, 3, 4};
    for (int round = 0; round < 40; round++) {
        MPI_Comm c = round % 2 ? rev : MPI_COMM_WORLD;
        MPI_Win w;
        MPI_OK(MPI_Win_create(buf, sizeof buf, 8, MPI_INFO_NULL, c, &w));
        MPI_OK(MPI_Win_fence(0, w));
        for (int k = 0; k < 3; k++) {
            MPI_OK(MPI_Put(src, 0, MPI_INT, 0, 0, 0, MPI_INT, w));
            MPI_OK(MPI_Win_fence(0, w));
        }
        for (int k = 0; k < 5; k++) {
            MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w));
            MPI_OK(MPI_Put(src, k % 2, MPI_INT, 0, 0, k % 2, MPI_INT, w));
            MPI_OK(MPI_Win_unlock(0, w));
        }
        MPI_OK(MPI_Win_free(&w));
        /* Progress with no window: a late unlock would be reported as dropped. */
        for (int j = 0; j < 2000; j++) {
            int flag;
            MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        }
    }
    MPI_OK(MPI_Comm_free(&rev));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK unlockfree\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
