/* pingpong.c - point-to-point latency and bandwidth between ranks 0 and 1
 * (other ranks only join the barriers).
 *
 * Modes:
 *   lat   blocking ping-pong (MPI_Send/MPI_Recv), 0 B .. 4 MiB; reports the
 *         half round-trip time (metric lat_us) and size / lat (bw_MBps).
 *   bw    windowed unidirectional bandwidth: rank 0 posts --window Isends,
 *         rank 1 the matching Irecvs (distinct receive buffers), both wait,
 *         rank 1 acknowledges with a 4-byte message; 1 B .. 4 MiB
 *         (--quick: 8 B, 4 KiB, 64 KiB, 1 MiB).
 *   bibw  the same in both directions at once (both ranks post window
 *         Irecvs and Isends); the bandwidth counts both directions.
 *
 * Every size is first exchanged once with a checked pattern (and a wrong
 * byte aborts the run), then warmed up, then timed `reps` times.
 */
#include "common.h"

#define MAX_SIZE (4L << 20)
#define TAG 11
#define TAG_ACK 12

static const long quick_sizes[] = {0, 1, 8, 64, 512, 4096, 32768, 262144,
                                   1L << 20, 4L << 20};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))
/* The windowed modes move 64 messages per step: fewer sizes with --quick. */
static const long quick_bw_sizes[] = {8, 4096, 65536, 1L << 20};
#define NQUICK_BW ((int)(sizeof quick_bw_sizes / sizeof quick_bw_sizes[0]))

static int rank;

/* Next size of the sweep after `s` (-1 at the end); `bw` selects the
 * windowed modes' --quick list. */
static long next_size(const struct bench_opts *o, long s, int bw)
{
    if (o->quick) {
        const long *l = bw ? quick_bw_sizes : quick_sizes;
        int n = bw ? NQUICK_BW : NQUICK;
        for (int i = 0; i < n; i++)
            if (l[i] > s)
                return l[i];
        return -1;
    }
    long n = s == 0 ? 1 : s * 2;
    return n <= MAX_SIZE ? n : -1;
}

/* First size of the sweep: 0 for latency, the first non-zero size for the
 * windowed modes (`bw`). */
static long first_size(const struct bench_opts *o, int bw)
{
    long s = bw ? next_size(o, 0, bw) : 0;
    while (s >= 0 && s < o->min_size)
        s = next_size(o, s, bw);
    return s;
}

static void pingpong_once(void *sbuf, void *rbuf, long n)
{
    if (rank == 0) {
        MPI_Send(sbuf, (int)n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
        MPI_Recv(rbuf, (int)n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(sbuf, (int)n, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
    }
}

struct lat_ctx {
    void *sbuf, *rbuf;
    long n;
};

static void lat_op(void *p)
{
    struct lat_ctx *c = p;
    pingpong_once(c->sbuf, c->rbuf, c->n);
}

static void run_lat(const struct bench_opts *o)
{
    unsigned char *sbuf = bench_malloc(MAX_SIZE);
    unsigned char *rbuf = bench_malloc(MAX_SIZE);
    double secs[BENCH_MAX_REPS];

    for (long n = first_size(o, 0); n >= 0 && bench_size_on(o, n);
         n = next_size(o, n, 0)) {
        /* Check: each side sends its own pattern. */
        bench_fill(sbuf, n, n * 2 + rank);
        memset(rbuf, 0, (size_t)n);
        MPI_Barrier(MPI_COMM_WORLD);
        pingpong_once(sbuf, rbuf, n);
        if (rank <= 1) {
            long bad = bench_check(rbuf, n, n * 2 + (1 - rank));
            if (bad >= 0)
                bench_fail(o, "lat", n, bad);
        }

        long iters = bench_iters_for_size(o, n, 64.0 * 1048576, 40, 10000);
        struct lat_ctx c = {sbuf, rbuf, n};
        iters = bench_time_cap(o, iters, lat_op, &c);
        bench_time_reps(o, iters, lat_op, &c, secs);
        if (rank == 0) {
            struct bench_stats lat = bench_us_per_op(secs, o->reps, 2 * iters);
            bench_result(o, "lat", n, iters, "lat_us", "lower", lat, NULL);
            if (n > 0)
                bench_result(o, "lat", n, iters, "bw_MBps", "higher",
                             bench_bw_of_lat(lat, (double)n), NULL);
        }
    }
    free(sbuf);
    free(rbuf);
}

/* One window: `bidir` = 0 sends 0 -> 1 only. */
static void window_once(unsigned char *sbuf, unsigned char *rwin, long n,
                        int w, int bidir, MPI_Request *reqs)
{
    int k = 0;
    int peer = 1 - rank;
    int ack = 0;
    if (rank == 1 || bidir)
        for (int j = 0; j < w; j++)
            MPI_Irecv(rwin + (size_t)j * (size_t)n, (int)n, MPI_BYTE, peer,
                      TAG, MPI_COMM_WORLD, &reqs[k++]);
    if (rank == 0 || bidir)
        for (int j = 0; j < w; j++)
            MPI_Isend(sbuf, (int)n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD,
                      &reqs[k++]);
    bench_waitall(k, reqs);
    if (!bidir) {
        /* Rank 0's sends may complete locally (eager); the ack says that
         * everything arrived. */
        if (rank == 1)
            MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD);
        else
            MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
}

struct win_ctx {
    unsigned char *sbuf, *rwin;
    long n;
    int w, bidir;
    MPI_Request *reqs;
};

static void win_op(void *p)
{
    struct win_ctx *c = p;
    if (rank <= 1)
        window_once(c->sbuf, c->rwin, c->n, c->w, c->bidir, c->reqs);
}

static void run_bw(const struct bench_opts *o, int bidir)
{
    const char *mode = bidir ? "bibw" : "bw";
    int w = o->window;
    /* --quick stops the windowed modes at 1 MiB: 64 x 4 MiB per window
     * costs seconds per size. */
    long maxn = o->quick ? 1L << 20 : MAX_SIZE;
    if (o->max_size >= 0 && o->max_size < maxn)
        maxn = o->max_size;
    unsigned char *sbuf = bench_malloc((size_t)maxn);
    unsigned char *rwin = NULL;
    MPI_Request *reqs = bench_malloc(2 * (size_t)w * sizeof *reqs);
    double secs[BENCH_MAX_REPS];

    if (rank <= 1)
        rwin = bench_malloc((size_t)w * (size_t)maxn);
    for (long n = first_size(o, 1); n >= 0 && n <= maxn && bench_size_on(o, n);
         n = next_size(o, n, 1)) {
        if (rank <= 1) {
            bench_fill(sbuf, n, n * 2 + rank);
            memset(rwin, 0, (size_t)w * (size_t)n);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank <= 1) {
            window_once(sbuf, rwin, n, w, bidir, reqs);
            if (rank == 1 || bidir)
                for (int j = 0; j < w; j++) {
                    long bad = bench_check(rwin + (size_t)j * (size_t)n, n,
                                           n * 2 + (1 - rank));
                    if (bad >= 0)
                        bench_fail(o, mode, n, bad);
                }
        }

        long iters = bench_iters_for_size(o, n * w, 128.0 * 1048576, 8, 2000);
        struct win_ctx c = {sbuf, rwin, n, w, bidir, reqs};
        iters = bench_time_cap(o, iters, win_op, &c);
        bench_time_reps(o, iters, win_op, &c, secs);
        if (rank == 0) {
            /* Time per window, then bytes per window over it. */
            struct bench_stats per = bench_us_per_op(secs, o->reps, iters);
            double bytes = (double)n * w * (bidir ? 2 : 1);
            char extra[64];
            snprintf(extra, sizeof extra, "window=%d", w);
            bench_result(o, mode, n, iters, "bw_MBps", "higher",
                         bench_bw_of_lat(per, bytes), extra);
        }
    }
    free(sbuf);
    free(rwin);
    free(reqs);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "pingpong", "lat|bw|bibw");
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);
    if (bench_mode_on(&o, "lat"))
        run_lat(&o);
    if (bench_mode_on(&o, "bw"))
        run_bw(&o, 0);
    if (bench_mode_on(&o, "bibw"))
        run_bw(&o, 1);
    bench_finish();
    return 0;
}
