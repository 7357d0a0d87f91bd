/* darray.c - distributed-array types (MPI_Type_create_darray) in point-to-
 * point.  Every rank holds the same global array and sends its own part
 * (its darray) to rank 0.  Rank 0 receives each part twice: into contiguous
 * memory, where the values must follow the owned indices in storage order
 * (computed here from the block/cyclic rules), and into an empty global
 * array with that rank's darray type, which must rebuild the global array
 * exactly once all parts are in.  C and Fortran order; block, cyclic(k),
 * block(k) and not-distributed dimensions; small and large (1 MiB+).
 *
 * 1, 2 or 4 ranks. */
#include "../p2p/common.h"

typedef struct {
    int gsizes[2];
    int distribs[2];
    int dargs[2];
    int psizes[2];
    int order;
} darray_desc;

static double f(long i, long j)
{
    return (double)i * 1e5 + (double)j;
}

/* Whether global index i of a dimension of size g is owned by coordinate c of p. */
static int owns(int distrib, int darg, long g, int p, int c, long i)
{
    switch (distrib) {
    case MPI_DISTRIBUTE_NONE:
        return 1;
    case MPI_DISTRIBUTE_BLOCK: {
        long b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
        return i >= c * b && i < (c + 1) * b;
    }
    default: {
        long k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        return (i / k) % p == c;
    }
    }
}

static long offset(const darray_desc *d, long i, long j)
{
    return d->order == MPI_ORDER_C ? i * d->gsizes[1] + j : i + j * d->gsizes[0];
}

static MPI_Datatype make(const darray_desc *d, int size, int rank)
{
    MPI_Datatype t;
    MPI_OK(MPI_Type_create_darray(size, rank, 2, d->gsizes, d->distribs, d->dargs, d->psizes,
                                  d->order, MPI_DOUBLE, &t));
    MPI_OK(MPI_Type_commit(&t));
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECKF(lb == 0 && ext == (MPI_Aint)d->gsizes[0] * d->gsizes[1] * 8, "darray extent %ld",
           (long)ext);
    return t;
}

static void run(const darray_desc *d)
{
    long g0 = d->gsizes[0], g1 = d->gsizes[1], n = g0 * g1;
    double *g = (double *)xmalloc((size_t)n * sizeof(double));
    for (long i = 0; i < g0; i++)
        for (long j = 0; j < g1; j++)
            g[offset(d, i, j)] = f(i, j);
    MPI_Datatype mine = make(d, t_size, t_rank);
    MPI_Request q[2];
    MPI_OK(MPI_Isend(g, 1, mine, 0, 5, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Isend(g, 1, mine, 0, 6, MPI_COMM_WORLD, &q[1]));
    if (t_rank == 0) {
        double *rebuilt = (double *)xmalloc((size_t)n * sizeof(double));
        double *part = (double *)xmalloc((size_t)n * sizeof(double));
        for (long k = 0; k < n; k++)
            rebuilt[k] = -1.0;
        for (int r = 0; r < t_size; r++) {
            int c0 = r / d->psizes[1], c1 = r % d->psizes[1]; /* row-major process grid */
            long want = 0;
            /* the owned cells in storage order: the fastest dimension innermost */
            int outer = d->order == MPI_ORDER_C ? 0 : 1;
            long no = outer == 0 ? g0 : g1, ni = outer == 0 ? g1 : g0;
            MPI_Status st;
            MPI_OK(MPI_Recv(part, (int)n, MPI_DOUBLE, r, 5, MPI_COMM_WORLD, &st));
            int got = -1;
            MPI_OK(MPI_Get_count(&st, MPI_DOUBLE, &got));
            for (long a = 0; a < no; a++)
                for (long b = 0; b < ni; b++) {
                    long i = outer == 0 ? a : b, j = outer == 0 ? b : a;
                    if (!owns(d->distribs[0], d->dargs[0], g0, d->psizes[0], c0, i) ||
                        !owns(d->distribs[1], d->dargs[1], g1, d->psizes[1], c1, j))
                        continue;
                    CHECKF(want < got && part[want] == f(i, j),
                           "darray of rank %d: element %ld is %.0f, expected (%ld, %ld)", r, want,
                           want < got ? part[want] : -1.0, i, j);
                    want++;
                }
            CHECKF(want == got, "darray of rank %d: %d elements, expected %ld", r, got, want);
            MPI_Datatype theirs = make(d, t_size, r);
            int size = 0;
            MPI_OK(MPI_Type_size(theirs, &size));
            CHECK(size == (int)(want * 8));
            MPI_OK(MPI_Recv(rebuilt, 1, theirs, r, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Type_free(&theirs));
        }
        for (long k = 0; k < n; k++)
            CHECKF(rebuilt[k] == g[k], "rebuilt global array: element %ld is %.0f, expected %.0f", k,
                   rebuilt[k], g[k]);
        free(rebuilt);
        free(part);
    }
    MPI_Status sts[2];
    MPI_OK(MPI_Waitall(2, q, sts));
    MPI_OK(MPI_Type_free(&mine));
    free(g);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 1 || t_size == 2 || t_size == 4);
    int p0 = t_size == 1 ? 1 : 2, p1 = t_size == 4 ? 2 : 1;
    for (int o = 0; o < 2; o++) {
        int order = o ? MPI_ORDER_FORTRAN : MPI_ORDER_C;
        for (int big = 0; big < 2; big++) {
            int r = big ? 700 : 10, c = big ? 500 : 7; /* 700 x 500 doubles: 2.7 MiB */
            darray_desc block_cyclic = {{r, c},
                                        {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
                                        {MPI_DISTRIBUTE_DFLT_DARG, 3},
                                        {p0, p1},
                                        order};
            run(&block_cyclic);
            darray_desc cyclic_block = {{r, c},
                                        {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK},
                                        {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG},
                                        {p0, p1},
                                        order};
            run(&cyclic_block);
            darray_desc blockk_none = {{r, c},
                                       {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_NONE},
                                       {(r + p0 - 1) / p0 + 1, MPI_DISTRIBUTE_DFLT_DARG},
                                       {p0, 1},
                                       order};
            if (p1 == 1)
                run(&blockk_none);
        }
    }
    t_done("darray");
    return 0;
}
