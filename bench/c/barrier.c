/* barrier.c - time per MPI_Barrier on all ranks of MPI_COMM_WORLD.
 *
 * Each repetition times `iters` consecutive barriers on every rank; the
 * repetition's time is the slowest rank's (MPI_MAX reduction), so a rank
 * that leaves early cannot flatter the result.  Reported as size=0,
 * metric lat_us (microseconds per barrier).
 */
#include "common.h"

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "barrier", "barrier");
    int rank;
    double secs[BENCH_MAX_REPS];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bench_header(&o);

    if (bench_size_on(&o, 0)) {
        long iters = bench_iters(&o, 2000, 10);
        for (long i = 0; i < iters / 10 + 2; i++)
            MPI_Barrier(MPI_COMM_WORLD);
        for (int r = 0; r < o.reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++)
                MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime() - t0, tmax = 0.0;
            MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            secs[r] = tmax;
        }
        if (rank == 0)
            bench_result(&o, "barrier", 0, iters, "lat_us", "lower",
                         bench_us_per_op(secs, o.reps, iters), NULL);
    }
    MPI_Finalize();
    return 0;
}
