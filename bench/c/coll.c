/* coll.c - collective operations on all ranks of MPI_COMM_WORLD.
 *
 * mode=allreduce   MPI_Allreduce, MPI_SUM of size/8 doubles
 * mode=iallreduce  the same by MPI_Iallreduce + MPI_Wait
 * mode=reduce      MPI_Reduce of the same to rank 0 (allreduce.c only)
 * mode=bcast       MPI_Bcast of size bytes from rank 0
 * mode=alltoall    MPI_Alltoall, size bytes to and from every rank
 * mode=barrier     MPI_Barrier (size=0)
 *
 * Sizes 8 B, 1 KiB, 64 KiB, 1 MiB, and for (i)allreduce also 256 KiB and
 * 4 MiB (--quick: 8 B and 1 MiB).  Built with COLL_ALLREDUCE_RANGE defined
 * (allreduce.c), it is the `allreduce` benchmark: allreduce, iallreduce and
 * reduce only, at 64 KiB, 256 KiB, 1 MiB and 4 MiB, --quick or not.  Each operation
 * is checked once before timing (sums, broadcast contents, every all-to-all
 * block).  The time of a repetition is the slowest rank's; metric lat_us is
 * microseconds per operation, lower is better.
 */
#include "common.h"

#ifdef COLL_ALLREDUCE_RANGE
#define BENCH_NAME "allreduce"
#define BENCH_MODES "allreduce|iallreduce|reduce"
static const int ops[] = {0, 1, 5};
static const long red_sizes[] = {65536, 256L << 10, 1L << 20, 4L << 20};
#define NRED ((int)(sizeof red_sizes / sizeof red_sizes[0]))
static const long *const red_quick_sizes = red_sizes;
#define NRED_QUICK NRED
/* No other operation runs. */
static const long *const sizes = red_sizes, *const quick_sizes = red_sizes;
#define NSIZES NRED
#define NQUICK NRED
#else
#define BENCH_NAME "coll"
#define BENCH_MODES "allreduce|iallreduce|bcast|alltoall|barrier"
static const int ops[] = {0, 1, 2, 3, 4};
static const long sizes[] = {8, 1024, 65536, 1L << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
static const long quick_sizes[] = {8, 1L << 20};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))
/* The reductions also at 256 KiB and 4 MiB (quick: as the others). */
static const long red_sizes[] = {8,         1024,      65536,
                                 256L << 10, 1L << 20, 4L << 20};
#define NRED ((int)(sizeof red_sizes / sizeof red_sizes[0]))
static const long *const red_quick_sizes = quick_sizes;
#define NRED_QUICK NQUICK
#endif
/* Largest block of bcast and alltoall, largest allreduce vector. */
#define MAX_SIZE (1L << 20)
#define MAX_RED_SIZE (4L << 20)
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

struct ctx {
    int rank, nranks;
    int op; /* 0 allreduce, 1 iallreduce, 2 bcast, 3 alltoall, 4 barrier,
               5 reduce */
    long n;
    void *sbuf, *rbuf;
};

static void coll_op(void *p)
{
    struct ctx *c = p;
    switch (c->op) {
    case 0:
        MPI_Allreduce(c->sbuf, c->rbuf, (int)(c->n / 8), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
        break;
    case 1: {
        MPI_Request req;
        MPI_Iallreduce(c->sbuf, c->rbuf, (int)(c->n / 8), MPI_DOUBLE, MPI_SUM,
                       MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    }
    case 5:
        MPI_Reduce(c->sbuf, c->rbuf, (int)(c->n / 8), MPI_DOUBLE, MPI_SUM, 0,
                   MPI_COMM_WORLD);
        break;
    case 2:
        MPI_Bcast(c->sbuf, (int)c->n, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    case 3:
        MPI_Alltoall(c->sbuf, (int)c->n, MPI_BYTE, c->rbuf, (int)c->n,
                     MPI_BYTE, MPI_COMM_WORLD);
        break;
    default:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

/* Sets up buffers for one operation and checks one call's result. */
static void check_op(const struct bench_opts *o, struct ctx *c,
                     const char *name)
{
    long n = c->n;
    long bad = -1;
    switch (c->op) {
    case 0:
    case 1:
    case 5: {
        double *s = c->sbuf, *r = c->rbuf;
        long k = n / 8;
        for (long i = 0; i < k; i++) {
            s[i] = (double)(c->rank + 1) * (double)(i % 1000 + 1);
            r[i] = -1.0;
        }
        coll_op(c);
        /* Exact in double: small integers. */
        double ranks_sum = (double)c->nranks * (c->nranks + 1) / 2.0;
        /* MPI_Reduce: the result on rank 0 only. */
        for (long i = 0; i < k && bad < 0 && (c->op != 5 || c->rank == 0); i++)
            if (r[i] != ranks_sum * (double)(i % 1000 + 1))
                bad = i * 8;
        break;
    }
    case 2:
        if (c->rank == 0)
            bench_fill(c->sbuf, n, n + 77);
        else
            memset(c->sbuf, 0, (size_t)n);
        coll_op(c);
        bad = bench_check(c->sbuf, n, n + 77);
        break;
    case 3: {
        unsigned char *s = c->sbuf, *r = c->rbuf;
        for (int j = 0; j < c->nranks; j++)
            bench_fill(s + (size_t)j * (size_t)n, n,
                       (long)c->rank * 1000 + j);
        memset(r, 0, (size_t)c->nranks * (size_t)n);
        coll_op(c);
        for (int j = 0; j < c->nranks && bad < 0; j++) {
            long b = bench_check(r + (size_t)j * (size_t)n, n,
                                 (long)j * 1000 + c->rank);
            if (b >= 0)
                bad = (long)j * n + b;
        }
        break;
    }
    default:
        coll_op(c);
        break;
    }
    if (bad >= 0)
        bench_fail(o, name, n, bad);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, BENCH_NAME, BENCH_MODES);
    struct ctx c;
    double secs[BENCH_MAX_REPS];
    static const char *const names[] = {"allreduce", "iallreduce", "bcast",
                                        "alltoall", "barrier", "reduce"};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    bench_header(&o);
    size_t room = (size_t)c.nranks * MAX_SIZE;
    if (room < (size_t)MAX_RED_SIZE)
        room = (size_t)MAX_RED_SIZE;
    c.sbuf = bench_malloc(room);
    c.rbuf = bench_malloc(room);

    for (int oi = 0; oi < NOPS; oi++) {
        int op = ops[oi];
        if (!bench_mode_on(&o, names[op]))
            continue;
        c.op = op;
        int red = op <= 1 || op == 5;
        const long *list = red ? (o.quick ? red_quick_sizes : red_sizes)
                               : (o.quick ? quick_sizes : sizes);
        int nlist = red ? (o.quick ? NRED_QUICK : NRED)
                        : (o.quick ? NQUICK : NSIZES);
        for (int i = 0; i < (op == 4 ? 1 : nlist); i++) {
            long n = op == 4 ? 0 : list[i];
            if (!bench_size_on(&o, n))
                continue;
            c.n = n;
            MPI_Barrier(MPI_COMM_WORLD);
            check_op(&o, &c, names[op]);
            /* Per-rank bytes moved differ by operation; scale iterations by
             * the larger buffer involved. */
            long bytes = op == 3 ? n * c.nranks : n;
            long iters = bench_iters_for_size(&o, bytes, 64.0 * 1048576, 10,
                                              5000);
            iters = bench_time_cap(&o, iters, coll_op, &c);
            bench_time_reps(&o, iters, coll_op, &c, secs);
            if (c.rank == 0)
                bench_result(&o, names[op], n, iters, "lat_us", "lower",
                             bench_us_per_op(secs, o.reps, iters), NULL);
        }
    }
    free(c.sbuf);
    free(c.rbuf);
    bench_finish();
    return 0;
}
