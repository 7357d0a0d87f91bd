/* fatal.c - errors under MPI_ERRORS_ARE_FATAL (the default) and
 * MPI_ERRORS_ABORT end the whole job with a message naming the call; the
 * harness checks the exit status and stderr.  The mode is argv[1]:
 *   rank        rank 1: MPI_Send to rank 7 (rank 0 waits in MPI_Recv)
 *   truncate    rank 0: MPI_Recv of a message longer than its buffer
 *   comm        rank 1: MPI_Send on MPI_COMM_NULL
 *   count       MPI_ERRORS_ABORT on MPI_COMM_WORLD, rank 1: MPI_Recv count -1
 *   uninit      MPI_Send before MPI_Init
 *   finalized   MPI_Barrier after MPI_Finalize
 *   abort       rank 1: MPI_Abort(MPI_COMM_WORLD, 42)
 *   spawn       MPI_Comm_spawn of a program that does not exist, with the default
 *               handler
 * 2 ranks.  Prints "UNREACHABLE" if the job survives the error. */
#include "common.h"

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "rank";
    int v = 0;
    if (strcmp(mode, "uninit") == 0) {
        MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        printf("UNREACHABLE\n");
        return 0;
    }
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    if (strcmp(mode, "rank") == 0) {
        if (t_rank == 1)
            MPI_Send(&v, 1, MPI_INT, 7, 0, MPI_COMM_WORLD);
        else
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "truncate") == 0) {
        int big[10] = {0};
        if (t_rank == 1)
            MPI_Send(big, 10, MPI_INT, 0, 0, MPI_COMM_WORLD);
        else
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(mode, "comm") == 0) {
        if (t_rank == 1)
            MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_NULL);
        else
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "count") == 0) {
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ABORT));
        if (t_rank == 1)
            MPI_Recv(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "finalized") == 0) {
        MPI_Finalize();
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(mode, "abort") == 0) {
        if (t_rank == 1)
            MPI_Abort(MPI_COMM_WORLD, 42);
        else
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "spawn") == 0) {
        MPI_Comm child;
        MPI_Comm_spawn("./no-such-program-madmpi", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0,
                       MPI_COMM_WORLD, &child, MPI_ERRCODES_IGNORE);
    } else {
        FAILF("unknown mode %s", mode);
    }
    printf("UNREACHABLE\n");
    fflush(stdout);
    return 0;
}
