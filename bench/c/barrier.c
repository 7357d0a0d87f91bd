/* barrier.c - time per MPI_Barrier on all ranks of MPI_COMM_WORLD.
 *
 * Each repetition times `iters` consecutive barriers on every rank; the
 * repetition's time is the slowest rank's, so a rank that leaves early
 * cannot flatter the result.  Reported as mode=barrier size=0, metric
 * lat_us (microseconds per barrier).
 */
#include "common.h"

static void barrier_op(void *ctx)
{
    (void)ctx;
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "barrier", "barrier");
    int rank;
    double secs[BENCH_MAX_REPS];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bench_header(&o);

    if (bench_size_on(&o, 0)) {
        long iters = bench_iters(&o, 5000, 10);
        iters = bench_time_cap(&o, iters, barrier_op, NULL);
        bench_time_reps(&o, iters, barrier_op, NULL, secs);
        if (rank == 0)
            bench_result(&o, "barrier", 0, iters, "lat_us", "lower",
                         bench_us_per_op(secs, o.reps, iters), NULL);
    }
    bench_finish();
    return 0;
}
