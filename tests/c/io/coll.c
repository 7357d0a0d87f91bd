/* coll.c - collective buffering (two-phase I/O) paths, each write checked by
 * reading the file with plain POSIX and read back collectively:
 *  A. uneven interleaved pieces (every rank its own block length, tile count
 *     and hole after its block; the last rank of 3 or more writes nothing),
 *     over a file pre-filled by POSIX, so that holes must keep their bytes;
 *     with cb_nodes 1, 2 and every rank (several aggregators on one node) and
 *     cb_buffer_size 1000 (pieces cut at window boundaries, many rounds);
 *     the read back asks for 3 tiles more than written: the rank whose tiles
 *     end the file gets a short count and keeps its buffer past the end;
 *  B. a 9 MiB region of 1 KiB rows with the default hints (several
 *     aggregators chosen for the size);
 *  C. atomic mode, every rank writing the same interleaved region: the
 *     region holds one rank's bytes only;
 *  D. sparse pieces (64 bytes every 100 KiB) read collectively: several
 *     preads per window, holes not delivered;
 *  E. 8 KiB pieces 1 MiB apart written and read collectively with one
 *     aggregator: one pwritev / preadv per piece, holes keep their bytes.
 * 1 or more ranks. */
#include "common_io.h"

static unsigned char val(int rank, long i)
{
    return (unsigned char)(rank * 37 + i * 7 + (i >> 8) + 1);
}

static unsigned char prefill(long x)
{
    return (unsigned char)(0xA0 ^ (x * 13));
}

/* Pre-fill [0, len) of `path` with prefill() by POSIX on rank 0. */
static void posix_prefill(const char *path, long len)
{
    if (t_rank == 0) {
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        CHECK(fd >= 0);
        unsigned char *b = malloc(len);
        for (long x = 0; x < len; x++)
            b[x] = prefill(x);
        CHECK(pwrite(fd, b, len, 0) == len);
        close(fd);
        free(b);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

static MPI_Info hints(const char *cb_nodes, const char *cb_size, const char *cb_write, const char *cb_read)
{
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    if (cb_nodes)
        MPI_OK(MPI_Info_set(info, "cb_nodes", cb_nodes));
    if (cb_size)
        MPI_OK(MPI_Info_set(info, "cb_buffer_size", cb_size));
    if (cb_write)
        MPI_OK(MPI_Info_set(info, "romio_cb_write", cb_write));
    if (cb_read)
        MPI_OK(MPI_Info_set(info, "romio_cb_read", cb_read));
    return info;
}

/* A: block length, tiles and hole of rank r. */
static int blen(int r) { return 3 * r + 5; }
static int tiles(int r) { return t_size >= 3 && r == t_size - 1 ? 0 : 150 + 37 * r; }
static int hole(int r) { return r % 2 ? 6 : 0; }

static void case_a(const char *cb_nodes, const char *cb_size)
{
    int me = t_rank, n = t_size;
    const char *path = path_of("a.dat");
    long period = 0, mydisp = 0;
    for (int r = 0; r < n; r++) {
        if (r == me)
            mydisp = period;
        period += blen(r) + hole(r);
    }
    long pre = period * 20 + 11;
    posix_prefill(path, pre);
    /* The file every rank expects. */
    long end = pre, disp = 0;
    for (int r = 0; r < n; r++) {
        if (tiles(r) > 0 && (tiles(r) - 1) * period + disp + blen(r) > end)
            end = (tiles(r) - 1) * period + disp + blen(r);
        disp += blen(r) + hole(r);
    }
    unsigned char *want = calloc(end, 1);
    for (long x = 0; x < pre; x++)
        want[x] = prefill(x);
    disp = 0;
    for (int r = 0; r < n; r++) {
        for (long t = 0; t < tiles(r); t++)
            for (int k = 0; k < blen(r); k++)
                want[t * period + disp + k] = val(r, t * blen(r) + k);
        disp += blen(r) + hole(r);
    }
    MPI_Datatype ft;
    int bl = blen(me);
    MPI_Aint d = 0;
    MPI_Datatype blk;
    MPI_OK(MPI_Type_create_hindexed(1, &bl, &d, MPI_BYTE, &blk));
    MPI_OK(MPI_Type_create_resized(blk, 0, period, &ft));
    MPI_OK(MPI_Type_commit(&ft));
    MPI_OK(MPI_Type_free(&blk));
    MPI_Info info = hints(cb_nodes, cb_size, "enable", "enable");
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_File_set_view(fh, mydisp, MPI_BYTE, ft, "native", info));
    long count = (long)tiles(me) * bl;
    unsigned char *out = malloc(count + 1), *in = malloc(count + 3 * bl + 1);
    for (long i = 0; i < count; i++)
        out[i] = val(me, i);
    MPI_Status st;
    int c;
    MPI_OK(MPI_File_write_at_all(fh, 0, out, (int)count, MPI_BYTE, &st));
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &c));
    CHECK(c == count);
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    unsigned char *got;
    long size = posix_slurp(path, &got);
    CHECKF(size == end, "file size %ld, expected %ld (cb_nodes %s)", size, end, cb_nodes);
    for (long x = 0; x < end; x++)
        CHECKF(got[x] == want[x], "byte %ld is %d, expected %d (cb_nodes %s, cb_buffer_size %s)", x,
               got[x], want[x], cb_nodes ? cb_nodes : "-", cb_size ? cb_size : "-");
    free(got);
    /* Read back, 3 tiles more than written; bytes past the end keep 0x5A. */
    long ask = count + 3 * bl;
    memset(in, 0x5A, ask);
    MPI_OK(MPI_File_read_at_all(fh, 0, in, (int)ask, MPI_BYTE, &st));
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &c));
    long expect = 0;
    for (long t = 0; t < tiles(me) + 3; t++) {
        long at = t * period + mydisp;
        long avail = end - at < bl ? (end - at > 0 ? end - at : 0) : bl;
        for (int k = 0; k < bl; k++)
            CHECKF(in[t * bl + k] == (k < avail ? want[at + k] : 0x5A), "read byte %ld of tile %ld: %d", t * bl + k,
                   t, in[t * bl + k]);
        expect += avail;
        if (avail < bl)
            break;
    }
    CHECKF(c == expect, "read count %d, expected %ld", c, expect);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Type_free(&ft));
    free(out);
    free(in);
    free(want);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        MPI_OK(MPI_File_delete(path, MPI_INFO_NULL));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* B: 1 KiB rows, rank r the r-th of every n rows, 9 MiB in all, default hints. */
static void case_b(void)
{
    int me = t_rank, n = t_size;
    const char *path = path_of("b.dat");
    enum { ROW = 1024 };
    long rows = (9L << 20) / ROW / n;
    MPI_Datatype ft;
    MPI_OK(MPI_Type_vector((int)rows, ROW, ROW * n, MPI_BYTE, &ft));
    MPI_OK(MPI_Type_commit(&ft));
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)me * ROW, MPI_BYTE, ft, "native", MPI_INFO_NULL));
    long count = rows * ROW;
    unsigned char *out = malloc(count), *in = malloc(count);
    for (long i = 0; i < count; i++)
        out[i] = val(me, i);
    MPI_OK(MPI_File_write_all(fh, out, (int)count, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    unsigned char *got;
    long size = posix_slurp(path, &got);
    CHECK(size == count * n);
    for (long x = 0; x < size; x++) {
        long row = x / ROW;
        int r = (int)(row % n);
        long i = row / n * ROW + x % ROW;
        CHECKF(got[x] == val(r, i), "byte %ld is %d", x, got[x]);
    }
    free(got);
    memset(in, 0, count);
    MPI_OK(MPI_File_read_at_all(fh, 0, in, (int)count, MPI_BYTE, MPI_STATUS_IGNORE));
    CHECK(memcmp(in, out, count) == 0);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Type_free(&ft));
    free(out);
    free(in);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        MPI_OK(MPI_File_delete(path, MPI_INFO_NULL));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* C: atomic mode, everyone writes the same 20-byte-every-50 pieces. */
static void case_c(void)
{
    int me = t_rank;
    const char *path = path_of("c.dat");
    enum { BL = 20, STRIDE = 50, BLOCKS = 400 };
    posix_prefill(path, (long)STRIDE * BLOCKS);
    MPI_Datatype ft;
    MPI_OK(MPI_Type_vector(BLOCKS, BL, STRIDE, MPI_BYTE, &ft));
    MPI_OK(MPI_Type_commit(&ft));
    MPI_Info info = hints("2", "3000", "enable", NULL);
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_File_set_atomicity(fh, 1));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, ft, "native", info));
    unsigned char *out = malloc(BL * BLOCKS);
    memset(out, 'a' + me, BL * BLOCKS);
    MPI_OK(MPI_File_write_at_all(fh, 0, out, BL * BLOCKS, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    unsigned char *got;
    long size = posix_slurp(path, &got);
    CHECK(size == (long)STRIDE * BLOCKS);
    unsigned char w = got[0];
    CHECK(w >= 'a' && w < 'a' + t_size);
    for (long x = 0; x < size; x++)
        CHECKF(got[x] == (x % STRIDE < BL ? w : prefill(x)), "byte %ld is %d", x, got[x]);
    free(got);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Type_free(&ft));
    free(out);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* D: 64 bytes every 100 KiB, rank r the r-th block of each group of n. */
static void case_d(void)
{
    int me = t_rank, n = t_size;
    const char *path = path_of("d.dat");
    enum { BL = 64, STRIDE = 100 << 10, BLOCKS = 12 };
    long len = (long)STRIDE * n * BLOCKS;
    posix_prefill(path, len);
    MPI_Datatype ft;
    MPI_OK(MPI_Type_vector(BLOCKS, BL, STRIDE * n, MPI_BYTE, &ft));
    MPI_OK(MPI_Type_commit(&ft));
    MPI_Info info = hints(NULL, NULL, NULL, "enable");
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, info, &fh));
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)me * STRIDE, MPI_BYTE, ft, "native", info));
    unsigned char in[BL * BLOCKS];
    MPI_Status st;
    int c;
    MPI_OK(MPI_File_read_all(fh, in, BL * BLOCKS, MPI_BYTE, &st));
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &c));
    CHECK(c == BL * BLOCKS);
    for (int b = 0; b < BLOCKS; b++)
        for (int k = 0; k < BL; k++) {
            long x = (long)me * STRIDE + (long)b * STRIDE * n + k;
            CHECKF(in[b * BL + k] == prefill(x), "block %d byte %d", b, k);
        }
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Type_free(&ft));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* E: 8 KiB blocks, rank r's b-th at (b * n + r) MiB, over a pre-filled file. */
static void case_e(void)
{
    int me = t_rank, n = t_size;
    const char *path = path_of("e.dat");
    enum { BL = 8192, MIB = 1 << 20, BLOCKS = 3 };
    long len = (long)MIB * n * BLOCKS;
    posix_prefill(path, len);
    MPI_Datatype ft;
    MPI_OK(MPI_Type_vector(BLOCKS, BL, MIB * n, MPI_BYTE, &ft));
    MPI_OK(MPI_Type_commit(&ft));
    MPI_Info info = hints("1", NULL, "enable", "enable");
    MPI_File fh;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_File_set_view(fh, (MPI_Offset)me * MIB, MPI_BYTE, ft, "native", info));
    unsigned char *out = malloc(BL * BLOCKS), *in = malloc(BL * BLOCKS);
    for (long i = 0; i < BL * BLOCKS; i++)
        out[i] = val(me, i);
    MPI_OK(MPI_File_write_all(fh, out, BL * BLOCKS, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    unsigned char *got;
    long size = posix_slurp(path, &got);
    CHECK(size == len);
    for (long x = 0; x < size; x++) {
        long blk = x / MIB, k = x % MIB;
        unsigned char w = k < BL ? val((int)(blk % n), blk / n * BL + k) : prefill(x);
        CHECKF(got[x] == w, "byte %ld is %d, expected %d", x, got[x], w);
    }
    free(got);
    memset(in, 0, BL * BLOCKS);
    MPI_OK(MPI_File_read_at_all(fh, 0, in, BL * BLOCKS, MPI_BYTE, MPI_STATUS_IGNORE));
    CHECK(memcmp(in, out, BL * BLOCKS) == 0);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Type_free(&ft));
    free(out);
    free(in);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    io_init(&argc, &argv);
    char all[16];
    snprintf(all, sizeof all, "%d", t_size);
    case_a("1", NULL);
    case_a("2", "1000");
    case_a(all, NULL);
    case_a(all, "1000");
    case_b();
    case_c();
    case_d();
    case_e();
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0)
        printf("OK coll\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
