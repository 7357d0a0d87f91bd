/* hello.c - every rank reports its rank, the size of MPI_COMM_WORLD, the
 * processor name and the MPI library version.
 *
 * Self-check: the ranks gather their rank numbers on rank 0, which verifies
 * that each rank 0..size-1 appears exactly once and that the reported MPI
 * version is at least 3.0.  Exits non-zero (with a reason) otherwise.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, namelen, verlen, version, subversion;
    char name[MPI_MAX_PROCESSOR_NAME];
    char libver[MPI_MAX_LIBRARY_VERSION_STRING];
    int failed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &namelen);
    MPI_Get_library_version(libver, &verlen);
    MPI_Get_version(&version, &subversion);

    /* Library version strings may span lines; keep only the first one. */
    libver[strcspn(libver, "\r\n")] = '\0';
    printf("hello from rank %d of %d on %s (MPI %d.%d, %s)\n", rank, size,
           name, version, subversion, libver);
    fflush(stdout);

    if (size < 1 || rank < 0 || rank >= size) {
        fprintf(stderr, "hello: rank %d / size %d is inconsistent\n", rank,
                size);
        failed = 1;
    }
    if (version < 3) {
        fprintf(stderr, "hello: MPI version %d.%d is older than 3.0\n",
                version, subversion);
        failed = 1;
    }
    if (namelen <= 0 || (int)strlen(name) != namelen) {
        fprintf(stderr, "hello: processor name length %d does not match \"%s\"\n",
                namelen, name);
        failed = 1;
    }

    int *ranks = NULL;
    if (rank == 0) {
        ranks = malloc((size_t)size * sizeof *ranks);
        if (ranks == NULL) {
            fprintf(stderr, "hello: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Gather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < size; i++) {
            if (ranks[i] != i) {
                fprintf(stderr, "hello: gathered rank %d at position %d\n",
                        ranks[i], i);
                failed = 1;
            }
        }
        free(ranks);
    }

    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any_failed)
        printf("hello: OK (%d ranks)\n", size);
    MPI_Finalize();
    return any_failed ? 1 : 0;
}
