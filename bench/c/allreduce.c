/* allreduce.c - MPI_Allreduce and MPI_Iallreduce (+ MPI_Wait), MPI_SUM of
 * doubles, 64 KiB, 256 KiB, 1 MiB and 4 MiB, on all ranks of
 * MPI_COMM_WORLD: coll.c's reductions over the range of large vectors
 * (the runner starts it on 2 and on --ranks ranks).  See coll.c.
 */
#define COLL_ALLREDUCE_RANGE 1
#include "coll.c"
