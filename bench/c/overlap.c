/* overlap.c - how much of a large non-blocking transfer is hidden behind
 * computation.
 *
 * Ranks 0 and 1 exchange `size` bytes (each posts MPI_Irecv + MPI_Isend).
 * First the pure communication time t_comm (post, then MPI_Waitall at once)
 * is measured; then each iteration posts the same exchange, computes for
 * t_comp = t_comm, and waits, taking t_total.  The hidden fraction is
 *
 *     overlap = (t_comm + t_comp - t_total) / t_comm     (clamped to 0..1)
 *
 * 1 means the transfer progressed entirely during the computation, 0 means
 * nothing moved until MPI_Waitall.  Each iteration starts with a 0-byte
 * MPI_Sendrecv between the two ranks (not timed) so both post together.
 *
 * mode=nocall  the computation makes no MPI call (needs asynchronous
 *              progress: a progress thread, or hardware/kernel offload).
 * mode=test    the computation calls MPI_Testall about every 10 us.
 *
 * Sizes 64 KiB, 1 MiB, 4 MiB.  Metric overlap_pct (higher is better);
 * extra keys comm_us, comp_us, total_us (medians, per iteration).
 */
#include "common.h"

#define TAG 51
#define TAG_SYNC 52
#define MAX_SIZE (4L << 20)

struct ctx {
    int rank;
    long n;
    int compute; /* 0: none, 1: no MPI calls, 2: with MPI_Testall */
    double comp_s;
    double acc;
    unsigned char *sbuf, *rbuf;
};

static volatile double sink;

/* Spins for `secs` doing floating-point work; with `reqs`, polls them. */
static void compute(double secs, MPI_Request *reqs, int nreq)
{
    double x = 1.0, t0 = MPI_Wtime(), last = t0, now;
    int done = 0;
    while ((now = MPI_Wtime()) - t0 < secs) {
        for (int k = 0; k < 64; k++)
            x = x * 1.0000001 + 1e-9;
        if (reqs != NULL && !done && now - last >= 10e-6) {
            MPI_Status st[2];
            MPI_Testall(nreq, reqs, &done, st);
            last = now;
        }
    }
    sink = x;
}

static void iter_op(void *p)
{
    struct ctx *c = p;
    if (c->rank > 1)
        return;
    int peer = 1 - c->rank;
    MPI_Request reqs[2];
    MPI_Status st[2];
    MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, TAG_SYNC, NULL, 0, MPI_BYTE, peer,
                 TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double t0 = MPI_Wtime();
    MPI_Irecv(c->rbuf, (int)c->n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD,
              &reqs[0]);
    MPI_Isend(c->sbuf, (int)c->n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD,
              &reqs[1]);
    if (c->compute)
        compute(c->comp_s, c->compute == 2 ? reqs : NULL, 2);
    MPI_Waitall(2, reqs, st);
    c->acc += MPI_Wtime() - t0;
}

/* Seconds per iteration, slowest of ranks 0 and 1, for each repetition. */
static void measure(const struct bench_opts *o, struct ctx *c, long iters,
                    double *per_iter)
{
    for (int r = 0; r < o->reps; r++) {
        c->acc = 0.0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters; i++)
            iter_op(c);
        double t = c->acc / (double)iters;
        MPI_Allreduce(&t, &per_iter[r], 1, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "overlap", "nocall|test");
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "overlap: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);

    static const long sizes[] = {65536, 1L << 20, 4L << 20};
    static const long quick_sizes[] = {1L << 20};
    const long *list = o.quick ? quick_sizes : sizes;
    int nlist = o.quick ? 1 : 3;

    struct ctx c;
    c.rank = rank;
    c.sbuf = bench_malloc(MAX_SIZE);
    c.rbuf = bench_malloc(MAX_SIZE);
    double comm[BENCH_MAX_REPS], total[BENCH_MAX_REPS], pct[BENCH_MAX_REPS];

    for (int i = 0; i < nlist; i++) {
        long n = list[i];
        if (!bench_size_on(&o, n))
            continue;
        c.n = n;
        c.compute = 0;
        bench_fill(c.sbuf, n, n * 2 + rank);
        memset(c.rbuf, 0, MAX_SIZE);
        MPI_Barrier(MPI_COMM_WORLD);
        iter_op(&c);
        if (rank <= 1) {
            long bad = bench_check(c.rbuf, n, n * 2 + (1 - rank));
            if (bad >= 0)
                bench_fail(&o, "exchange", n, bad);
        }

        long iters = bench_iters_for_size(&o, n, 64.0 * 1048576, 10, 500);
        iters = bench_time_cap(&o, iters, iter_op, &c);
        measure(&o, &c, iters, comm);
        struct bench_stats cs = bench_stats_of(comm, o.reps);

        for (int mode = 1; mode <= 2; mode++) {
            const char *name = mode == 1 ? "nocall" : "test";
            if (!bench_mode_on(&o, name))
                continue;
            c.compute = mode;
            c.comp_s = cs.med;
            measure(&o, &c, iters, total);
            for (int r = 0; r < o.reps; r++) {
                double f = (cs.med + c.comp_s - total[r]) / cs.med;
                f = f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
                pct[r] = 100.0 * f;
            }
            if (rank == 0) {
                struct bench_stats ts = bench_stats_of(total, o.reps);
                char extra[128];
                snprintf(extra, sizeof extra,
                         "comm_us=%.2f comp_us=%.2f total_us=%.2f",
                         cs.med * 1e6, c.comp_s * 1e6, ts.med * 1e6);
                bench_result(&o, name, n, iters, "overlap_pct", "higher",
                             bench_stats_of(pct, o.reps), extra);
            }
        }
    }
    free(c.sbuf);
    free(c.rbuf);
    bench_finish();
    return 0;
}
