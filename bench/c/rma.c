/* rma.c - one-sided communication, rank 0 (origin) -> rank 1 (target), in
 * the patterns of the OSU one-sided benchmarks. Other ranks only take part
 * in the window's collective calls.
 *
 * Modes (window made with MPI_Win_allocate):
 *   put_lat_lock, get_lat_lock, acc_lat_lock   one operation then
 *       MPI_Win_flush, inside a lock_all epoch (metric lat_us)
 *   put_lat_fence, get_lat_fence, acc_lat_fence  one operation between two
 *       MPI_Win_fence calls (metric lat_us)
 *   put_bw_lock, get_bw_lock  --window operations then one flush
 *       (metric bw_MBps)
 *   put_rate   --window 8-byte puts to consecutive slots then one flush
 *       (metric msg_rate_M, 10^6 puts/s): where aggregation pays
 *   put_rate_many  the same with MANY_PUTS (1024) puts per flush, whatever
 *       --window says: many small puts, where the flush's round trip no
 *       longer hides what each put costs
 * Accumulates are MPI_SUM on MPI_DOUBLE (sizes multiple of 8). Before
 * timing, each mode's data is moved once and checked at the target (put,
 * accumulate) or the origin (get).
 */
#include "common.h"

static const long lat_sizes[] = {8, 64, 512, 4096, 65536};
/* Puts per flush of put_rate_many. */
#define MANY_PUTS 1024
#define NLAT ((int)(sizeof lat_sizes / sizeof lat_sizes[0]))
static const long quick_lat[] = {8, 4096};
#define NQLAT ((int)(sizeof quick_lat / sizeof quick_lat[0]))
static const long bw_sizes[] = {8, 512, 4096, 65536, 1048576};
#define NBW ((int)(sizeof bw_sizes / sizeof bw_sizes[0]))
static const long quick_bw[] = {4096, 1048576};
#define NQBW ((int)(sizeof quick_bw / sizeof quick_bw[0]))
#define MAX_BYTES 1048576L

enum kind { PUT, GET, ACC };

struct ctx {
    int rank, w;
    long n;
    enum kind k;
    int fence;
    unsigned char *buf, *base;
    MPI_Win win;
};

static void issue(struct ctx *c, long disp)
{
    if (c->k == PUT)
        MPI_Put(c->buf, (int)c->n, MPI_BYTE, 1, disp, (int)c->n, MPI_BYTE, c->win);
    else if (c->k == GET)
        MPI_Get(c->buf, (int)c->n, MPI_BYTE, 1, disp, (int)c->n, MPI_BYTE, c->win);
    else
        MPI_Accumulate(c->buf, (int)(c->n / 8), MPI_DOUBLE, 1, disp, (int)(c->n / 8), MPI_DOUBLE,
                       MPI_SUM, c->win);
}

/* One latency operation: lock mode, origin only; fence mode, everyone. */
static void lat_op(void *p)
{
    struct ctx *c = p;
    if (c->fence) {
        if (c->rank == 0)
            issue(c, 0);
        MPI_Win_fence(0, c->win);
    } else if (c->rank == 0) {
        issue(c, 0);
        MPI_Win_flush(1, c->win);
    }
}

/* --window operations to disjoint places, then one flush. */
static void window_op(void *p)
{
    struct ctx *c = p;
    if (c->rank != 0)
        return;
    long span = MAX_BYTES / c->n;
    for (int j = 0; j < c->w; j++)
        issue(c, (long)(j % span) * c->n);
    MPI_Win_flush(1, c->win);
}

/* Moves `n` bytes once with kind `k` and checks them. */
static void check_once(const struct bench_opts *o, struct ctx *c, const char *mode)
{
    long n = c->n;
    MPI_Win_lock_all(0, c->win);
    if (c->rank == 1)
        memset(c->base, 0, (size_t)n);
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rank == 0) {
        if (c->k == ACC) {
            double *d = (double *)c->buf;
            for (long i = 0; i < n / 8; i++)
                d[i] = (double)(i % 1000);
        } else if (c->k == PUT)
            bench_fill(c->buf, n, n + 3);
        if (c->k != GET) {
            issue(c, 0);
            MPI_Win_flush(1, c->win);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rank == 1 && c->k == GET)
        bench_fill(c->base, n, n + 4);
    MPI_Win_sync(c->win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rank == 0 && c->k == GET) {
        memset(c->buf, 0, (size_t)n);
        issue(c, 0);
        MPI_Win_flush(1, c->win);
        long bad = bench_check(c->buf, n, n + 4);
        if (bad >= 0)
            bench_fail(o, mode, n, bad);
    }
    if (c->rank == 1 && c->k != GET) {
        MPI_Win_sync(c->win);
        if (c->k == PUT) {
            long bad = bench_check(c->base, n, n + 3);
            if (bad >= 0)
                bench_fail(o, mode, n, bad);
        } else {
            double *d = (double *)c->base;
            for (long i = 0; i < n / 8; i++)
                if (d[i] != (double)(i % 1000))
                    bench_fail(o, mode, n, i * 8);
        }
    }
    MPI_Win_unlock_all(c->win);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void run_lat(const struct bench_opts *o, struct ctx *c, enum kind k, int fence,
                    const char *mode, double *secs)
{
    const long *list = o->quick ? quick_lat : lat_sizes;
    int nlist = o->quick ? NQLAT : NLAT;
    for (int i = 0; i < nlist && bench_mode_on(o, mode); i++) {
        long n = list[i];
        if (!bench_size_on(o, n))
            continue;
        c->n = n;
        c->k = k;
        c->fence = fence;
        check_once(o, c, mode);
        if (fence)
            MPI_Win_fence(0, c->win);
        else
            MPI_Win_lock_all(0, c->win);
        long iters = bench_iters_for_size(o, n, 4e8, 100, 4000);
        iters = bench_time_cap(o, iters, lat_op, c);
        bench_time_reps(o, iters, lat_op, c, secs);
        if (fence)
            MPI_Win_fence(MPI_MODE_NOSUCCEED, c->win);
        else
            MPI_Win_unlock_all(c->win);
        if (c->rank == 0)
            bench_result(o, mode, n, iters, "lat_us", "lower", bench_us_per_op(secs, o->reps, iters),
                         fence ? "sync=fence" : "sync=lock_all+flush");
    }
}

static void run_window(const struct bench_opts *o, struct ctx *c, enum kind k, const char *mode,
                       int rate, double *secs)
{
    static const long rate_sizes[] = {8};
    const long *list = rate ? rate_sizes : (o->quick ? quick_bw : bw_sizes);
    int nlist = rate ? 1 : (o->quick ? NQBW : NBW);
    for (int i = 0; i < nlist && bench_mode_on(o, mode); i++) {
        long n = list[i];
        if (!bench_size_on(o, n))
            continue;
        c->n = n;
        c->k = k;
        c->fence = 0;
        check_once(o, c, mode);
        MPI_Win_lock_all(0, c->win);
        long iters = rate ? bench_iters(o, 400, 10)
                          : bench_iters_for_size(o, n * c->w, 4e9, 10, 2000);
        iters = bench_time_cap(o, iters, window_op, c);
        bench_time_reps(o, iters, window_op, c, secs);
        MPI_Win_unlock_all(c->win);
        if (c->rank == 0) {
            struct bench_stats per = bench_us_per_op(secs, o->reps, iters);
            char extra[64];
            snprintf(extra, sizeof extra, "window=%d sync=lock_all+flush", c->w);
            if (rate)
                bench_result(o, mode, n, iters, "msg_rate_M", "higher",
                             bench_bw_of_lat(per, (double)c->w), extra);
            else
                bench_result(o, mode, n, iters, "bw_MBps", "higher",
                             bench_bw_of_lat(per, (double)n * c->w), extra);
        }
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(
        &argc, &argv, "rma",
        "put_lat_lock|get_lat_lock|acc_lat_lock|put_lat_fence|get_lat_fence|acc_lat_fence|"
        "put_bw_lock|get_bw_lock|put_rate|put_rate_many");
    int rank, nranks;
    static double secs[BENCH_MAX_REPS];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "rma: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);
    struct ctx c;
    c.rank = rank;
    c.w = o.window;
    c.buf = bench_malloc((size_t)MAX_BYTES);
    MPI_Win_allocate((MPI_Aint)MAX_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &c.base, &c.win);
    memset(c.buf, 0, (size_t)MAX_BYTES);

    run_lat(&o, &c, PUT, 0, "put_lat_lock", secs);
    run_lat(&o, &c, GET, 0, "get_lat_lock", secs);
    run_lat(&o, &c, ACC, 0, "acc_lat_lock", secs);
    run_lat(&o, &c, PUT, 1, "put_lat_fence", secs);
    run_lat(&o, &c, GET, 1, "get_lat_fence", secs);
    run_lat(&o, &c, ACC, 1, "acc_lat_fence", secs);
    run_window(&o, &c, PUT, "put_bw_lock", 0, secs);
    run_window(&o, &c, GET, "get_bw_lock", 0, secs);
    run_window(&o, &c, PUT, "put_rate", 1, secs);
    c.w = MANY_PUTS;
    run_window(&o, &c, PUT, "put_rate_many", 1, secs);

    MPI_Win_free(&c.win);
    free(c.buf);
    bench_finish();
    return 0;
}
