/* madpingpong.c - ping-pong through the Madeleine API (include/madeleine.h),
 * between ranks 0 and 1: each message is built as Madeleine II's paper builds
 * its RPC, an 8-byte header packed mad_receive_EXPRESS (the size) then the
 * payload packed mad_send_CHEAPER / mad_receive_CHEAPER; the receiver unpacks
 * the header, checks it, then the payload.  Sizes 0 B .. --max (default
 * 1 MiB), as pingpong.c's lat mode.  Metric lat_us (half round trip, lower
 * is better) and bw_MBps (payload / lat).  madmpi only (the networks part of
 * bench/runner runs it over the emulated networks, where the published
 * Madeleine II points are for this layer); it lives apart from the programs
 * of bench/c, which every MPI must build.
 */
#include "../common.h"

#include <madeleine.h>

#define MAX_SIZE (4L << 20)

static const long quick_sizes[] = {0, 1, 8, 64, 512, 4096, 32768, 262144,
                                   1L << 20};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))

struct ctx {
    int rank;
    mad_channel_t ch;
    unsigned char *sbuf, *rbuf;
    long n;
};

static void send_msg(struct ctx *c, int peer)
{
    mad_connection_t m;
    uint64_t head = (uint64_t)c->n;
    mad_begin_packing(c->ch, peer, &m);
    mad_pack(m, &head, sizeof head, mad_send_CHEAPER, mad_receive_EXPRESS);
    mad_pack(m, c->sbuf, (size_t)c->n, mad_send_CHEAPER, mad_receive_CHEAPER);
    mad_end_packing(&m);
}

static void recv_msg(struct ctx *c, int peer)
{
    mad_connection_t m;
    uint64_t head = 0;
    mad_begin_unpacking_from(c->ch, peer, &m);
    mad_unpack(m, &head, sizeof head, mad_send_CHEAPER, mad_receive_EXPRESS);
    if (head != (uint64_t)c->n) {
        fprintf(stderr, "madpingpong: header says %llu bytes, expected %ld\n",
                (unsigned long long)head, c->n);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    mad_unpack(m, c->rbuf, (size_t)c->n, mad_send_CHEAPER,
               mad_receive_CHEAPER);
    mad_end_unpacking(&m);
}

static void ping_op(void *p)
{
    struct ctx *c = p;
    if (c->rank == 0) {
        send_msg(c, 1);
        recv_msg(c, 1);
    } else if (c->rank == 1) {
        recv_msg(c, 0);
        send_msg(c, 0);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "madpingpong", "lat");
    int nranks;
    double secs[BENCH_MAX_REPS];
    struct ctx c;
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (c.rank == 0)
            fprintf(stderr, "madpingpong: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);
    mad_open_channel(MPI_COMM_WORLD, &c.ch);
    long maxn = o.max_size >= 0 && o.max_size < MAX_SIZE ? o.max_size
                                                         : MAX_SIZE;
    c.sbuf = bench_malloc((size_t)maxn);
    c.rbuf = bench_malloc((size_t)maxn);

    int k = 0;
    for (long n = 0; n <= maxn;) {
        if (bench_size_on(&o, n)) {
            c.n = n;
            bench_fill(c.sbuf, n, n * 2 + c.rank);
            if (n > 0)
                memset(c.rbuf, 0, (size_t)n);
            MPI_Barrier(MPI_COMM_WORLD);
            ping_op(&c);
            if (c.rank <= 1) {
                long bad = bench_check(c.rbuf, n, n * 2 + (1 - c.rank));
                if (bad >= 0)
                    bench_fail(&o, "lat", n, bad);
            }
            long iters = bench_iters_for_size(&o, n, 64.0 * 1048576, 40,
                                              10000);
            iters = bench_time_cap(&o, iters, ping_op, &c);
            bench_time_reps(&o, iters, ping_op, &c, secs);
            if (c.rank == 0) {
                struct bench_stats lat =
                    bench_us_per_op(secs, o.reps, 2 * iters);
                bench_result(&o, "lat", n, iters, "lat_us", "lower", lat,
                             NULL);
                if (n > 0)
                    bench_result(&o, "lat", n, iters, "bw_MBps", "higher",
                                 bench_bw_of_lat(lat, (double)n), NULL);
            }
        }
        if (o.quick) {
            if (++k >= NQUICK)
                break;
            n = quick_sizes[k];
        } else {
            n = n == 0 ? 1 : n * 2;
        }
    }
    mad_close_channel(&c.ch);
    free(c.sbuf);
    free(c.rbuf);
    bench_finish();
    return 0;
}
