/* One part of an MPMD job (tests/tests/launcher.rs, mpmd_*): each rank prints what it learned
 * from the launcher, then the ranks of every part talk to each other.
 *
 *   mpmd: role=<ROLE> rank=R size=S appnum=A|unset arg=<argv[1]> var=<$MPMD_VAR> dir=<cwd's name>
 *   mpmd: appnums=a0,a1,...      (rank 0: every rank's MPI_APPNUM, gathered; -1 when unset)
 *   mpmd: ring ok                (rank 0: a token went round every rank of every part)
 *
 * mpmd_peer.c is the same program under another name and role, so a job runs two different
 * binaries. Exits non-zero on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ROLE
#define ROLE "main"
#endif

int main(int argc, char **argv)
{
    int rank, size, flag = 0, *attr = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    int appnum = flag ? *attr : -1;
    char appnum_text[16] = "unset";
    if (flag)
        snprintf(appnum_text, sizeof appnum_text, "%d", appnum);
    char cwd[4096] = "?";
    if (!getcwd(cwd, sizeof cwd))
        strcpy(cwd, "?");
    const char *dir = strrchr(cwd, '/') ? strrchr(cwd, '/') + 1 : cwd;
    const char *var = getenv("MPMD_VAR");
    printf("mpmd: role=%s rank=%d size=%d appnum=%s arg=%s var=%s dir=%s\n", ROLE, rank, size,
           appnum_text, argc > 1 ? argv[1] : "-", var ? var : "-", dir);
    fflush(stdout);

    int *all = malloc(sizeof(int) * (size_t)size);
    if (!all)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Gather(&appnum, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpmd: appnums=");
        for (int r = 0; r < size; r++)
            printf("%s%d", r ? "," : "", all[r]);
        printf("\n");
    }
    free(all);

    /* A token goes round every rank, each adding its rank. */
    int token = 0;
    if (size > 1) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, size - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        if (token != size * (size - 1) / 2) {
            printf("mpmd: ring token %d, expected %d\n", token, size * (size - 1) / 2);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        printf("mpmd: ring ok\n");
    }
    MPI_Finalize();
    return 0;
}
