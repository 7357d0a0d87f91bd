/* views.c - file views: an interleaved vector filetype written independently
 * (data sieving under byte-range locks) and read collectively; a 3-D
 * subarray written and read collectively from a memory array with ghost
 * cells; external32 (big-endian bytes in the file) and a representation of
 * MPI_Register_datarep round trips; get_view, get_type_extent,
 * get_byte_offset. 1 or more ranks; every check also reads the file with
 * POSIX. */
#include "common_io.h"

static int swap_calls = 0;
static int swap_read(void *user, MPI_Datatype dt, int count, void *filebuf, MPI_Offset pos, void *extra)
{
    (void)dt;
    (void)extra;
    unsigned char *f = (unsigned char *)filebuf, *u = (unsigned char *)user + 4 * pos;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 4; k++)
            u[4 * i + k] = f[4 * i + 3 - k];
    swap_calls++;
    return MPI_SUCCESS;
}
static int swap_write(void *user, MPI_Datatype dt, int count, void *filebuf, MPI_Offset pos, void *extra)
{
    (void)dt;
    (void)extra;
    unsigned char *f = (unsigned char *)filebuf, *u = (unsigned char *)user + 4 * pos;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 4; k++)
            f[4 * i + k] = u[4 * i + 3 - k];
    swap_calls++;
    return MPI_SUCCESS;
}
static int swap_extent(MPI_Datatype dt, MPI_Aint *ext, void *extra)
{
    (void)extra;
    int s;
    MPI_Type_size(dt, &s);
    *ext = s;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    io_init(&argc, &argv);
    int me = t_rank, n = t_size;
    MPI_File fh;
    MPI_Status st;
    int cnt;
    char p1[1024];
    snprintf(p1, sizeof p1, "%s", path_of("vector.dat"));

    /* A: ranks own pairs of ints in turn. */
    enum { PAIRS = 50 };
    MPI_Datatype vec, ftype;
    MPI_OK(MPI_Type_vector(PAIRS, 2, 2 * n, MPI_INT, &vec));
    MPI_OK(MPI_Type_create_resized(vec, 0, (MPI_Aint)(2 * n * PAIRS) * sizeof(int), &ftype));
    MPI_OK(MPI_Type_commit(&ftype));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, p1, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)me * 2 * sizeof(int), MPI_INT, ftype, "native", MPI_INFO_NULL));
    int out[2 * PAIRS], in[2 * PAIRS];
    for (int i = 0; i < 2 * PAIRS; i++)
        out[i] = me * 10000 + i;
    MPI_OK(MPI_File_write(fh, out, 2 * PAIRS, MPI_INT, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 2 * PAIRS);
    MPI_Offset pos, bo;
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == 2 * PAIRS);
    MPI_OK(MPI_File_get_byte_offset(fh, 3, &bo));
    CHECKF(bo == (MPI_Offset)((me * 2 + 2 * n + 1) * sizeof(int)), "byte offset %lld", (long long)bo);
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    memset(in, 0, sizeof in);
    MPI_OK(MPI_File_read_at_all(fh, 0, in, 2 * PAIRS, MPI_INT, &st));
    for (int i = 0; i < 2 * PAIRS; i++)
        CHECKF(in[i] == out[i], "in[%d] = %d", i, in[i]);
    MPI_Offset disp;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_OK(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(disp == (MPI_Offset)(me * 2 * sizeof(int)) && et == MPI_INT && strcmp(rep, "native") == 0);
    MPI_Aint lb, fext;
    int fsize;
    MPI_OK(MPI_Type_get_extent(ft, &lb, &fext));
    MPI_OK(MPI_Type_size(ft, &fsize));
    CHECK(lb == 0 && fext == (MPI_Aint)(2 * n * PAIRS * sizeof(int)) && fsize == (int)(2 * PAIRS * sizeof(int)));
    MPI_OK(MPI_Type_free(&ft));
    MPI_OK(MPI_File_close(&fh));
    if (me == 0) {
        unsigned char *d;
        long len = posix_slurp(p1, &d);
        CHECKF(len == (long)(2 * n * PAIRS * sizeof(int)), "len %ld", len);
        int *x = (int *)d;
        for (int k = 0; k < 2 * n * PAIRS; k++) {
            int owner = (k / 2) % n, local = (k / (2 * n)) * 2 + k % 2;
            CHECKF(x[k] == owner * 10000 + local, "file int %d = %d", k, x[k]);
        }
        free(d);
    }
    MPI_OK(MPI_Type_free(&vec));
    MPI_OK(MPI_Type_free(&ftype));

    /* B: a 3-D subarray collective write and read, memory with ghost cells. */
    int dims[3] = {0, 0, 0};
    MPI_OK(MPI_Dims_create(n, 3, dims));
    int gs[3] = {12, 10, 8}, ls[3], st3[3], coords[3];
    int r = me;
    for (int d = 2; d >= 0; d--) {
        coords[d] = r % dims[d];
        r /= dims[d];
    }
    for (int d = 0; d < 3; d++) {
        gs[d] = gs[d] / dims[d] * dims[d];
        ls[d] = gs[d] / dims[d];
        st3[d] = coords[d] * ls[d];
    }
    MPI_Datatype sub, mem;
    MPI_OK(MPI_Type_create_subarray(3, gs, ls, st3, MPI_ORDER_C, MPI_INT, &sub));
    MPI_OK(MPI_Type_commit(&sub));
    int ms[3] = {ls[0] + 2, ls[1] + 2, ls[2] + 2}, one[3] = {1, 1, 1};
    MPI_OK(MPI_Type_create_subarray(3, ms, ls, one, MPI_ORDER_C, MPI_INT, &mem));
    MPI_OK(MPI_Type_commit(&mem));
    int mtot = ms[0] * ms[1] * ms[2];
    int *a = malloc(mtot * sizeof(int)), *b = malloc(mtot * sizeof(int));
    for (int i = 0; i < ls[0]; i++)
        for (int j = 0; j < ls[1]; j++)
            for (int k = 0; k < ls[2]; k++)
                a[((i + 1) * ms[1] + j + 1) * ms[2] + k + 1] =
                    ((st3[0] + i) * gs[1] + st3[1] + j) * gs[2] + st3[2] + k;
    char p2[1024];
    snprintf(p2, sizeof p2, "%s", path_of("cube.dat"));
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "cb_buffer_size", "4096"));
    MPI_OK(MPI_Info_set(info, "cb_nodes", "3"));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, p2, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, sub, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_write_all(fh, a, 1, mem, &st));
    MPI_OK(MPI_Get_elements(&st, MPI_INT, &cnt));
    CHECK(cnt == ls[0] * ls[1] * ls[2]);
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    for (int i = 0; i < mtot; i++)
        b[i] = -1;
    MPI_OK(MPI_File_read_at_all(fh, 0, b, 1, mem, &st));
    for (int i = 0; i < ls[0]; i++)
        for (int j = 0; j < ls[1]; j++)
            for (int k = 0; k < ls[2]; k++) {
                int at = ((i + 1) * ms[1] + j + 1) * ms[2] + k + 1;
                CHECKF(b[at] == a[at], "cube (%d,%d,%d) = %d", i, j, k, b[at]);
            }
    CHECK(b[0] == -1);
    MPI_OK(MPI_File_close(&fh));
    if (me == 0) {
        unsigned char *d;
        long len = posix_slurp(p2, &d);
        CHECKF(len == (long)(gs[0] * gs[1] * gs[2] * sizeof(int)), "cube len %ld", len);
        for (int i = 0; i < gs[0] * gs[1] * gs[2]; i++)
            CHECKF(((int *)d)[i] == i, "cube file int %d = %d", i, ((int *)d)[i]);
        free(d);
    }
    free(a);
    free(b);
    MPI_OK(MPI_Type_free(&sub));
    MPI_OK(MPI_Type_free(&mem));

    /* C: external32, each rank a block of 4 ints and 2 doubles. */
    char p3[1024];
    snprintf(p3, sizeof p3, "%s", path_of("ext32.dat"));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, p3, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL));
    MPI_OK(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(strcmp(rep, "external32") == 0);
    MPI_Aint ext;
    MPI_OK(MPI_File_get_type_extent(fh, MPI_INT, &ext));
    CHECK(ext == 4);
    MPI_Aint lsz;
    MPI_OK(MPI_Pack_external_size("external32", 1, MPI_LONG, &lsz));
    MPI_OK(MPI_File_get_type_extent(fh, MPI_LONG, &ext));
    CHECKF(ext == lsz, "extent of MPI_LONG %ld, external32 size %ld", (long)ext, (long)lsz);
    int iv[4] = {0x01020304 + me, -2, 7, me};
    double dv[2] = {1.5, -0.25 * me};
    MPI_Offset blk = 4 * 4 + 2 * 8;
    MPI_OK(MPI_File_write_at(fh, me * blk, iv, 4, MPI_INT, &st));
    MPI_OK(MPI_File_write_at(fh, me * blk + 16, dv, 2, MPI_DOUBLE, &st));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    int iv2[4];
    double dv2[2];
    MPI_OK(MPI_File_read_at(fh, me * blk, iv2, 4, MPI_INT, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 4);
    MPI_OK(MPI_File_read_at(fh, me * blk + 16, dv2, 2, MPI_DOUBLE, &st));
    CHECK(memcmp(iv, iv2, sizeof iv) == 0 && dv2[0] == 1.5 && dv2[1] == -0.25 * me);
    /* A view whose etype's external32 size differs from memory (MPI_LONG), dense filetype. */
    MPI_OK(MPI_File_set_view(fh, n * blk, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL));
    long lv[3] = {-1, 5, 1L << 20}, lv2[3];
    if (me == 0)
        MPI_OK(MPI_File_write(fh, lv, 3, MPI_LONG, &st));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_read_at(fh, 0, lv2, 3, MPI_LONG, &st));
    CHECK(lv2[0] == -1 && lv2[1] == 5 && lv2[2] == 1L << 20);
    MPI_OK(MPI_File_close(&fh));
    if (me == 0) {
        unsigned char *d;
        long len = posix_slurp(p3, &d);
        CHECKF(len == n * blk + 3 * lsz, "ext32 len %ld", len);
        for (int r2 = 0; r2 < n; r2++) {
            unsigned char *q = d + r2 * blk;
            int v0 = 0x01020304 + r2;
            CHECKF(q[0] == ((v0 >> 24) & 0xff) && q[3] == (v0 & 0xff), "big-endian int of rank %d", r2);
            CHECK(q[4] == 0xff && q[7] == 0xfe);
            CHECK(q[16] == 0x3f && q[17] == 0xf8); /* 1.5 big-endian */
        }
        unsigned char *l = d + n * blk;
        CHECK(l[0] == 0xff && l[lsz - 1] == 0xff && l[2 * lsz - 1] == 5);
        free(d);
    }
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, p3, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_SUCCESS);
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no-such-rep", MPI_INFO_NULL),
                 MPI_ERR_UNSUPPORTED_DATAREP);
    MPI_OK(MPI_File_close(&fh));

    /* D: a user data representation (32-bit byte swap). */
    MPI_OK(MPI_Register_datarep("swap32", swap_read, swap_write, swap_extent, NULL));
    EXPECT_CLASS(MPI_Register_datarep("swap32", swap_read, swap_write, swap_extent, NULL), MPI_ERR_DUP_DATAREP);
    char p4[1024];
    snprintf(p4, sizeof p4, "%s", path_of("swap.dat"));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, p4, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "swap32", MPI_INFO_NULL));
    int sv[3] = {0x11223344, me, -7}, sv2[3];
    MPI_OK(MPI_File_write_at_all(fh, 3 * me, sv, 3, MPI_INT, &st));
    MPI_OK(MPI_File_read_at(fh, 3 * me, sv2, 3, MPI_INT, &st));
    CHECK(memcmp(sv, sv2, sizeof sv) == 0 && swap_calls >= 2);
    MPI_OK(MPI_File_close(&fh));
    if (me == 0) {
        unsigned char *d;
        long len = posix_slurp(p4, &d);
        CHECK(len == 12 * n);
        CHECK(d[0] == 0x11 && d[3] == 0x44);
        free(d);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* E: the layout rule of etypes and filetypes (MPI-4.1 14.1.1): non-negative, monotonically
     * non-decreasing displacements, and no overlap in a file opened for writing. A view that
     * breaks it is refused with MPI_ERR_IO (MPICH's class); an overlapping filetype is fine
     * for reading. */
    {
        int bl[2], ds[2];
        MPI_Datatype neg, decr, ovl;
        bl[0] = 1, bl[1] = 1, ds[0] = -2, ds[1] = 2;
        MPI_OK(MPI_Type_indexed(2, bl, ds, MPI_INT, &neg));
        ds[0] = 3, ds[1] = 0;
        MPI_OK(MPI_Type_indexed(2, bl, ds, MPI_INT, &decr));
        bl[0] = 2, ds[0] = 0, ds[1] = 1; /* ints 0, 1, then 1 again */
        MPI_OK(MPI_Type_indexed(2, bl, ds, MPI_INT, &ovl));
        MPI_OK(MPI_Type_commit(&neg));
        MPI_OK(MPI_Type_commit(&decr));
        MPI_OK(MPI_Type_commit(&ovl));
        MPI_OK(MPI_File_open(MPI_COMM_WORLD, p4, MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
        EXPECT_CLASS(MPI_File_set_view(fh, 0, neg, neg, "native", MPI_INFO_NULL), MPI_ERR_IO);
        EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, neg, "native", MPI_INFO_NULL), MPI_ERR_IO);
        EXPECT_CLASS(MPI_File_set_view(fh, 0, decr, decr, "native", MPI_INFO_NULL), MPI_ERR_IO);
        EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, decr, "native", MPI_INFO_NULL), MPI_ERR_IO);
        EXPECT_CLASS(MPI_File_set_view(fh, 0, ovl, ovl, "native", MPI_INFO_NULL), MPI_ERR_IO);
        EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, ovl, "native", MPI_INFO_NULL), MPI_ERR_IO);
        /* The refused views left the previous one in place: plain ints from 0. */
        int w4[4] = {40, 41, 42, 43};
        if (me == 0)
            MPI_OK(MPI_File_write_at(fh, 0, w4, 4, MPI_INT, &st));
        MPI_OK(MPI_File_close(&fh));
        MPI_OK(MPI_File_open(MPI_COMM_WORLD, p4, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
        EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, neg, "native", MPI_INFO_NULL), MPI_ERR_IO);
        EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, decr, "native", MPI_INFO_NULL), MPI_ERR_IO);
        MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, ovl, "native", MPI_INFO_NULL));
        int r3[3] = {0, 0, 0};
        MPI_OK(MPI_File_read_at(fh, 0, r3, 3, MPI_INT, &st));
        CHECKF(r3[0] == 40 && r3[1] == 41 && r3[2] == 41, "overlapping read %d %d %d", r3[0], r3[1],
               r3[2]);
        MPI_OK(MPI_File_close(&fh));
        MPI_OK(MPI_Type_free(&neg));
        MPI_OK(MPI_Type_free(&decr));
        MPI_OK(MPI_Type_free(&ovl));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK views\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
