/* coll.c - collective operations on all ranks of MPI_COMM_WORLD.
 *
 * mode=allreduce  MPI_Allreduce, MPI_SUM of size/8 doubles
 * mode=bcast      MPI_Bcast of size bytes from rank 0
 * mode=alltoall   MPI_Alltoall, size bytes to and from every rank
 * mode=barrier    MPI_Barrier (size=0)
 *
 * Sizes 8 B, 1 KiB, 64 KiB, 1 MiB (--quick: 8 B and 1 MiB).  Each operation is checked once before
 * timing (sums, broadcast contents, every all-to-all block).  The time of a
 * repetition is the slowest rank's; metric lat_us is microseconds per
 * operation, lower is better.
 */
#include "common.h"

static const long sizes[] = {8, 1024, 65536, 1L << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
static const long quick_sizes[] = {8, 1L << 20};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))
#define MAX_SIZE (1L << 20)

struct ctx {
    int rank, nranks;
    int op; /* 0 allreduce, 1 bcast, 2 alltoall, 3 barrier */
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
    case 1:
        MPI_Bcast(c->sbuf, (int)c->n, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    case 2:
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
    case 0: {
        double *s = c->sbuf, *r = c->rbuf;
        long k = n / 8;
        for (long i = 0; i < k; i++) {
            s[i] = (double)(c->rank + 1) * (double)(i % 1000 + 1);
            r[i] = -1.0;
        }
        coll_op(c);
        /* Exact in double: small integers. */
        double ranks_sum = (double)c->nranks * (c->nranks + 1) / 2.0;
        for (long i = 0; i < k && bad < 0; i++)
            if (r[i] != ranks_sum * (double)(i % 1000 + 1))
                bad = i * 8;
        break;
    }
    case 1:
        if (c->rank == 0)
            bench_fill(c->sbuf, n, n + 77);
        else
            memset(c->sbuf, 0, (size_t)n);
        coll_op(c);
        bad = bench_check(c->sbuf, n, n + 77);
        break;
    case 2: {
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
    struct bench_opts o = bench_init(&argc, &argv, "coll",
                                     "allreduce|bcast|alltoall|barrier");
    struct ctx c;
    double secs[BENCH_MAX_REPS];
    static const char *const names[] = {"allreduce", "bcast", "alltoall",
                                        "barrier"};
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    bench_header(&o);
    c.sbuf = bench_malloc((size_t)c.nranks * MAX_SIZE);
    c.rbuf = bench_malloc((size_t)c.nranks * MAX_SIZE);

    for (int op = 0; op < 4; op++) {
        if (!bench_mode_on(&o, names[op]))
            continue;
        c.op = op;
        const long *list = o.quick ? quick_sizes : sizes;
        int nlist = o.quick ? NQUICK : NSIZES;
        for (int i = 0; i < (op == 3 ? 1 : nlist); i++) {
            long n = op == 3 ? 0 : list[i];
            if (!bench_size_on(&o, n))
                continue;
            c.n = n;
            MPI_Barrier(MPI_COMM_WORLD);
            check_op(&o, &c, names[op]);
            /* Per-rank bytes moved differ by operation; scale iterations by
             * the larger buffer involved. */
            long bytes = op == 2 ? n * c.nranks : n;
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
