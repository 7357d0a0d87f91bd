/* io.c - collective MPI-IO of a 3-D subarray: N ranks (4 by default) each
 * own one block of a global 3-D array of doubles (MPI_Dims_create
 * decomposition), described by MPI_Type_create_subarray as the filetype of
 * the view; mode=write times MPI_File_write_all of the whole array, mode=read
 * MPI_File_read_all of it (the data is checked once per size before timing).
 * Sizes (global array bytes): 2 MiB (64^3 doubles) and 16 MiB (128^3);
 * --quick: 2 MiB only.  The file lives in $MADMPI_BENCH_IODIR, else $TMPDIR,
 * else /tmp, and is removed at the end.  Metric bw_MBps: array bytes per
 * second of the slowest rank (1 MB = 1e6 B), higher is better.  Writes go
 * to the page cache (no sync inside the timing): this measures the
 * library's collective I/O path, not the disk.
 */
#include "common.h"
#include <unistd.h>

static const int edges[] = {64, 128};

struct ctx {
    MPI_File fh;
    double *buf;
    int count;
    int write;
};

static void op(void *p)
{
    struct ctx *c = p;
    if (c->write)
        MPI_File_write_at_all(c->fh, 0, c->buf, c->count, MPI_DOUBLE, MPI_STATUS_IGNORE);
    else
        MPI_File_read_at_all(c->fh, 0, c->buf, c->count, MPI_DOUBLE, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "io", "write|read");
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    bench_header(&o);
    char path[1024];
    const char *dir = getenv("MADMPI_BENCH_IODIR");
    if (!dir)
        dir = getenv("TMPDIR");
    if (!dir)
        dir = "/tmp";
    long stamp = (long)getpid();
    MPI_Bcast(&stamp, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof path, "%s/madmpi-bench-io-%ld.dat", dir, stamp);
    int dims[3] = {0, 0, 0};
    MPI_Dims_create(nranks, 3, dims);
    int coords[3], r = rank;
    for (int d = 2; d >= 0; d--) {
        coords[d] = r % dims[d];
        r /= dims[d];
    }
    static const char *const names[] = {"write", "read"};
    int nsizes = o.quick ? 1 : 2;
    for (int s = 0; s < nsizes; s++) {
        int gs[3], ls[3], st[3];
        for (int d = 0; d < 3; d++) {
            gs[d] = edges[s] / dims[d] * dims[d];
            ls[d] = gs[d] / dims[d];
            st[d] = coords[d] * ls[d];
        }
        long total = (long)gs[0] * gs[1] * gs[2] * (long)sizeof(double);
        if (!bench_size_on(&o, total))
            continue;
        MPI_Datatype sub;
        MPI_Type_create_subarray(3, gs, ls, st, MPI_ORDER_C, MPI_DOUBLE, &sub);
        MPI_Type_commit(&sub);
        struct ctx c;
        c.count = ls[0] * ls[1] * ls[2];
        c.buf = bench_malloc((size_t)c.count * sizeof(double));
        MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &c.fh);
        MPI_File_set_view(c.fh, 0, MPI_DOUBLE, sub, "native", MPI_INFO_NULL);
        /* Check once: write global indices, read them back. */
        for (int i = 0; i < ls[0]; i++)
            for (int j = 0; j < ls[1]; j++)
                for (int k = 0; k < ls[2]; k++)
                    c.buf[((long)i * ls[1] + j) * ls[2] + k] =
                        (double)(((long)(st[0] + i) * gs[1] + st[1] + j) * gs[2] + st[2] + k);
        c.write = 1;
        op(&c);
        MPI_File_sync(c.fh);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_File_sync(c.fh);
        memset(c.buf, 0, (size_t)c.count * sizeof(double));
        c.write = 0;
        op(&c);
        for (int i = 0; i < ls[0]; i++)
            for (int j = 0; j < ls[1]; j++)
                for (int k = 0; k < ls[2]; k++) {
                    long at = ((long)i * ls[1] + j) * ls[2] + k;
                    double want = (double)(((long)(st[0] + i) * gs[1] + st[1] + j) * gs[2] + st[2] + k);
                    if (c.buf[at] != want)
                        bench_fail(&o, "read back", total, at * (long)sizeof(double));
                }
        for (int mode = 0; mode < 2; mode++) {
            if (!bench_mode_on(&o, names[mode]))
                continue;
            c.write = mode == 0;
            double secs[BENCH_MAX_REPS];
            long iters = bench_time_cap(&o, bench_iters(&o, 20, 2), op, &c);
            bench_time_reps(&o, iters, op, &c, secs);
            if (rank == 0) {
                struct bench_stats lat = bench_us_per_op(secs, o.reps, iters);
                bench_result(&o, names[mode], total, iters, "bw_MBps", "higher",
                             bench_bw_of_lat(lat, (double)total), NULL);
            }
        }
        MPI_File_close(&c.fh);
        if (rank == 0)
            MPI_File_delete(path, MPI_INFO_NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        free(c.buf);
        MPI_Type_free(&sub);
    }
    bench_finish();
    return 0;
}
