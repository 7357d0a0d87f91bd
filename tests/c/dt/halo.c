/* halo.c - a periodic 2-D halo exchange with subarray types, in C and in
 * Fortran storage order.  The global grid is split along dimension 0 over
 * the ranks (a ring; with 1 rank everything goes to itself); dimension 1 is
 * periodic within each rank (send-to-self).  Dimension 0 is exchanged
 * first on the interior columns, then dimension 1 on full rows, so that the
 * corners are filled too.  Every cell, halos included, must then hold the
 * value of its (wrapped) global coordinates.
 *
 * Shapes: a small one, one whose dimension-0 halos are large (1 MiB and
 * more), one whose dimension-1 halos are.  Any number of ranks. */
#include "../p2p/common.h"

static int fortran; /* storage order of the current run */
static long LX, LY; /* local sizes, halos included */

static long at(long i, long j)
{
    return fortran ? i + j * LX : i * LY + j;
}

static double f(long gi, long gj)
{
    return (double)gi * 1e5 + (double)gj;
}

static MPI_Datatype sub(long si, long sj, long ni, long nj)
{
    int sizes[2] = {(int)LX, (int)LY}, subs[2] = {(int)ni, (int)nj}, starts[2] = {(int)si, (int)sj};
    MPI_Datatype t;
    MPI_OK(MPI_Type_create_subarray(2, sizes, subs, starts,
                                    fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, MPI_DOUBLE, &t));
    MPI_OK(MPI_Type_commit(&t));
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECKF(lb == 0 && ext == (MPI_Aint)(LX * LY * 8), "subarray bounds %ld %ld", (long)lb, (long)ext);
    int size;
    MPI_OK(MPI_Type_size(t, &size));
    CHECK(size == (int)(ni * nj * 8));
    return t;
}

static void halo(long nx, long ny, long h, int order_fortran)
{
    fortran = order_fortran;
    LX = nx + 2 * h;
    LY = ny + 2 * h;
    long gx = nx * t_size, gy = ny;
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
    double *a = (double *)xmalloc((size_t)(LX * LY) * sizeof(double));
    for (long i = 0; i < LX; i++)
        for (long j = 0; j < LY; j++) {
            int interior = i >= h && i < nx + h && j >= h && j < ny + h;
            a[at(i, j)] = interior ? f(t_rank * nx + i - h, j - h) : -1.0;
        }

    /* dimension 0: interior columns, with the neighbours */
    MPI_Datatype in_lo = sub(h, h, h, ny), in_hi = sub(nx, h, h, ny);
    MPI_Datatype gh_lo = sub(0, h, h, ny), gh_hi = sub(nx + h, h, h, ny);
    MPI_Request q[4];
    MPI_Status st[4];
    MPI_OK(MPI_Irecv(a, 1, gh_lo, prev, 1, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Irecv(a, 1, gh_hi, next, 2, MPI_COMM_WORLD, &q[1]));
    MPI_OK(MPI_Isend(a, 1, in_hi, next, 1, MPI_COMM_WORLD, &q[2]));
    MPI_OK(MPI_Isend(a, 1, in_lo, prev, 2, MPI_COMM_WORLD, &q[3]));
    MPI_OK(MPI_Waitall(4, q, st));

    /* dimension 1: full rows, with itself */
    MPI_Datatype cin_lo = sub(0, h, LX, h), cin_hi = sub(0, ny, LX, h);
    MPI_Datatype cgh_lo = sub(0, 0, LX, h), cgh_hi = sub(0, ny + h, LX, h);
    MPI_OK(MPI_Irecv(a, 1, cgh_lo, t_rank, 3, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Irecv(a, 1, cgh_hi, t_rank, 4, MPI_COMM_WORLD, &q[1]));
    MPI_OK(MPI_Isend(a, 1, cin_hi, t_rank, 3, MPI_COMM_WORLD, &q[2]));
    MPI_OK(MPI_Isend(a, 1, cin_lo, t_rank, 4, MPI_COMM_WORLD, &q[3]));
    MPI_OK(MPI_Waitall(4, q, st));

    for (long i = 0; i < LX; i++)
        for (long j = 0; j < LY; j++) {
            long gi = ((t_rank * nx + i - h) % gx + gx) % gx;
            long gj = ((j - h) % gy + gy) % gy;
            CHECKF(a[at(i, j)] == f(gi, gj),
                   "%s order, %ldx%ld halo %ld: cell (%ld, %ld) = %.0f, expected %.0f",
                   fortran ? "Fortran" : "C", nx, ny, h, i, j, a[at(i, j)], f(gi, gj));
        }
    MPI_Datatype all[8] = {in_lo, in_hi, gh_lo, gh_hi, cin_lo, cin_hi, cgh_lo, cgh_hi};
    for (int i = 0; i < 8; i++)
        MPI_OK(MPI_Type_free(&all[i]));
    free(a);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    for (int fo = 0; fo < 2; fo++) {
        halo(4, 6, 1, fo);
        halo(4, 80000, 2, fo);
        halo(70000, 6, 2, fo);
    }
    t_done("halo");
    return 0;
}
