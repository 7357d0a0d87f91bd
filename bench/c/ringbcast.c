/* ringbcast.c - ring broadcasts progressed by polling in the application, as
 * HPL's panel broadcasts (BCAST 0, "1ring") do.
 *
 * Broadcast k starts at rank k % N and travels once around the ring: each
 * rank receives it from its left neighbour and, unless it is the last one
 * (the root's left neighbour), passes it on to its right neighbour with
 * MPI_Send.  A rank waits for its part by polling, never by a blocking
 * receive, as HPL's `do HPL_bcast(...) while (not done)` loop does:
 *
 * mode=iprobe  MPI_Iprobe(left, tag) in a loop, then MPI_Recv (HPL's way)
 * mode=test    MPI_Irecv(left, tag) posted first, then MPI_Test in a loop
 *
 * With more ranks than cores, a rank that polls without giving its CPU away
 * keeps the rank it waits for from running; this benchmark shows whether an
 * implementation yields when its polling calls find nothing.  Successive
 * broadcasts are not separated by a barrier (their roots rotate, as HPL's
 * panels do).  Sizes 1 KiB, 64 KiB, 1 MiB (--quick: 1 KiB and 1 MiB); every
 * size is checked once before timing (every rank, every root).  The time of
 * a repetition is the slowest rank's; metric lat_us is microseconds per
 * broadcast, lower is better.
 */
#include "common.h"

static const long sizes[] = {1024, 65536, 1L << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
static const long quick_sizes[] = {1024, 1L << 20};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))
#define MAX_SIZE (1L << 20)
#define TAG 77

struct ctx {
    int rank, nranks;
    int test;   /* 0: Iprobe + Recv, 1: Irecv + Test */
    long n;
    long k;     /* broadcasts so far: the next root is k % nranks */
    char *buf;
};

/* Spin until the broadcast's message from the left neighbour is here and
 * received into c->buf. */
static void ring_recv(struct ctx *c, int left)
{
    int flag = 0;
    if (c->test) {
        MPI_Request r;
        MPI_Irecv(c->buf, (int)c->n, MPI_BYTE, left, TAG, MPI_COMM_WORLD,
                  &r);
        while (!flag)
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    } else {
        MPI_Status st;
        while (!flag)
            MPI_Iprobe(left, TAG, MPI_COMM_WORLD, &flag, &st);
        MPI_Recv(c->buf, (int)c->n, MPI_BYTE, left, TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
}

static void ring_bcast(void *p)
{
    struct ctx *c = p;
    int root = (int)(c->k % c->nranks);
    int left = (c->rank + c->nranks - 1) % c->nranks;
    int right = (c->rank + 1) % c->nranks;
    c->k++;
    if (c->rank != root)
        ring_recv(c, left);
    if (right != root)
        MPI_Send(c->buf, (int)c->n, MPI_BYTE, right, TAG, MPI_COMM_WORLD);
}

/* One broadcast from every root, each checked on every rank. */
static void check_size(const struct bench_opts *o, struct ctx *c,
                       const char *name)
{
    for (int root = 0; root < c->nranks; root++) {
        long seed = c->n + 31 * root + 7 * c->test;
        c->k = root;
        if (c->rank == root)
            bench_fill(c->buf, c->n, seed);
        else
            memset(c->buf, 0, (size_t)c->n);
        ring_bcast(c);
        long bad = bench_check(c->buf, c->n, seed);
        if (bad >= 0)
            bench_fail(o, name, c->n, bad);
    }
    c->k = 0;
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "ringbcast", "iprobe|test");
    struct ctx c;
    double secs[BENCH_MAX_REPS];
    static const char *const names[] = {"iprobe", "test"};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    bench_header(&o);
    c.buf = bench_malloc(MAX_SIZE);

    for (int mode = 0; mode < 2; mode++) {
        if (!bench_mode_on(&o, names[mode]))
            continue;
        c.test = mode;
        const long *list = o.quick ? quick_sizes : sizes;
        int nlist = o.quick ? NQUICK : NSIZES;
        for (int i = 0; i < nlist; i++) {
            long n = list[i];
            if (!bench_size_on(&o, n))
                continue;
            c.n = n;
            MPI_Barrier(MPI_COMM_WORLD);
            check_size(&o, &c, names[mode]);
            long iters = bench_iters_for_size(&o, n, 64.0 * 1048576, 10,
                                              5000);
            /* Every rank runs the same number of broadcasts, so that the
             * roots rotate alike on all of them. */
            iters = bench_time_cap(&o, iters, ring_bcast, &c);
            bench_time_reps(&o, iters, ring_bcast, &c, secs);
            if (c.rank == 0)
                bench_result(&o, names[mode], n, iters, "lat_us", "lower",
                             bench_us_per_op(secs, o.reps, iters), NULL);
        }
    }
    free(c.buf);
    bench_finish();
    return 0;
}
