/* msgrate.c - small-message rate between ranks 0 and 1 (other ranks idle).
 *
 * One iteration: rank 1 pre-posts --window (default 64) MPI_Irecv, rank 0
 * issues --window MPI_Isend of `size` bytes, both wait for all of them, and
 * rank 1 acknowledges with one 4-byte message, so the sender cannot run
 * ahead of the receiver.  Metric msg_rate_M: millions of messages per second
 * (higher is better); sizes 0, 1, 8, 64, 512 bytes.  Before timing, one
 * window is exchanged with checked contents.
 */
#include "common.h"

#define TAG 21
#define TAG_ACK 22

static const long sizes[] = {0, 1, 8, 64, 512};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
static const long quick_sizes[] = {8, 512};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))

struct ctx {
    int rank, w;
    long n;
    unsigned char *sbuf, *rwin;
    MPI_Request *reqs;
};

static void window_op(void *p)
{
    struct ctx *c = p;
    int ack = 0;
    if (c->rank == 0) {
        for (int j = 0; j < c->w; j++)
            MPI_Isend(c->sbuf, (int)c->n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD,
                      &c->reqs[j]);
        bench_waitall(c->w, c->reqs);
        MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else if (c->rank == 1) {
        for (int j = 0; j < c->w; j++)
            MPI_Irecv(c->rwin + (size_t)j * (size_t)c->n, (int)c->n, MPI_BYTE,
                      0, TAG, MPI_COMM_WORLD, &c->reqs[j]);
        bench_waitall(c->w, c->reqs);
        MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "msgrate", "uni");
    int rank, nranks;
    double secs[BENCH_MAX_REPS];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "msgrate: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);

    const long *list = o.quick ? quick_sizes : sizes;
    int nlist = o.quick ? NQUICK : NSIZES;
    struct ctx c;
    c.rank = rank;
    c.w = o.window;
    c.sbuf = bench_malloc(512);
    c.rwin = bench_malloc((size_t)o.window * 512);
    c.reqs = bench_malloc((size_t)o.window * sizeof *c.reqs);

    for (int i = 0; i < nlist && bench_mode_on(&o, "uni"); i++) {
        long n = list[i];
        if (!bench_size_on(&o, n))
            continue;
        c.n = n;
        bench_fill(c.sbuf, n, n + 5);
        memset(c.rwin, 0, (size_t)o.window * (size_t)n);
        MPI_Barrier(MPI_COMM_WORLD);
        window_op(&c);
        if (rank == 1)
            for (int j = 0; j < c.w; j++) {
                long bad = bench_check(c.rwin + (size_t)j * (size_t)n, n,
                                       n + 5);
                if (bad >= 0)
                    bench_fail(&o, "uni", n, bad);
            }

        long iters = bench_iters(&o, 4000, 10);
        iters = bench_time_cap(&o, iters, window_op, &c);
        bench_time_reps(&o, iters, window_op, &c, secs);
        if (rank == 0) {
            /* Windows per microsecond times window = Mmsg/s. */
            struct bench_stats per = bench_us_per_op(secs, o.reps, iters);
            char extra[64];
            snprintf(extra, sizeof extra, "window=%d", c.w);
            bench_result(&o, "uni", n, iters, "msg_rate_M", "higher",
                         bench_bw_of_lat(per, (double)c.w), extra);
        }
    }
    free(c.sbuf);
    free(c.rwin);
    free(c.reqs);
    bench_finish();
    return 0;
}
