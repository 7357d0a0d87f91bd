/* basic.c - MPI-IO without views: open modes and their errors, sizes, info
 * hints, file error handlers, explicit offsets, individual file pointers,
 * seek, non-blocking and split collective forms, _c counts, statuses, and a
 * POSIX read-back of what was written. 1 or more ranks. */
#include "common_io.h"

static int handler_calls = 0;
static int handler_code = 0;
static void file_handler(MPI_File *fh, int *code, ...)
{
    (void)fh;
    handler_calls++;
    handler_code = *code;
}

int main(int argc, char **argv)
{
    io_init(&argc, &argv);
    int me = t_rank, n = t_size;
    MPI_File fh;
    char name[64];
    snprintf(name, sizeof name, "basic.dat");
    const char *p = path_of(name);
    char pbuf[1024];
    snprintf(pbuf, sizeof pbuf, "%s", p);

    /* The default file error handler returns errors. */
    MPI_Errhandler eh;
    MPI_OK(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    MPI_OK(MPI_Errhandler_free(&eh));

    /* Opening a missing file, bad amodes. */
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, path_of("missing"), MPI_MODE_RDONLY, MPI_INFO_NULL, &fh),
                 MPI_ERR_NO_SUCH_FILE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh),
                 MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_RDWR | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
                 MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_CREATE, MPI_INFO_NULL, &fh), MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, t_dir, MPI_MODE_RDWR, MPI_INFO_NULL, &fh), MPI_ERR_BAD_FILE);

    /* Create with hints. */
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "cb_buffer_size", "1048576"));
    MPI_OK(MPI_Info_set(info, "striping_factor", "4"));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_Info_free(&info));
    CHECK(fh != MPI_FILE_NULL);
    MPI_Info used;
    MPI_OK(MPI_File_get_info(fh, &used));
    char v[MPI_MAX_INFO_VAL];
    int flag = 0;
    MPI_OK(MPI_Info_get(used, "cb_buffer_size", MPI_MAX_INFO_VAL - 1, v, &flag));
    CHECK(flag && strcmp(v, "1048576") == 0);
    /* A hint that means nothing to the file system may be dropped (MPICH does). */
    MPI_OK(MPI_Info_get(used, "striping_factor", MPI_MAX_INFO_VAL - 1, v, &flag));
    CHECK(!flag || strcmp(v, "4") == 0);
    MPI_OK(MPI_Info_get(used, "cb_nodes", MPI_MAX_INFO_VAL - 1, v, &flag));
    CHECK(flag && atoi(v) >= 1);
    MPI_OK(MPI_Info_free(&used));
    int amode;
    MPI_OK(MPI_File_get_amode(fh, &amode));
    CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR));
    MPI_Group g, wg;
    int cmp;
    MPI_OK(MPI_File_get_group(fh, &g));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    MPI_OK(MPI_Group_compare(g, wg, &cmp));
    CHECK(cmp == MPI_IDENT);
    MPI_OK(MPI_Group_free(&g));
    MPI_OK(MPI_Group_free(&wg));

    /* Explicit offsets: each rank writes 100 ints at its block. */
    int buf[100], rbuf[100];
    for (int i = 0; i < 100; i++)
        buf[i] = me * 1000 + i;
    MPI_Status st;
    int cnt;
    MPI_OK(MPI_File_write_at(fh, (MPI_Offset)me * sizeof buf, buf, 100, MPI_INT, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 100);
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    MPI_Offset sz;
    MPI_OK(MPI_File_get_size(fh, &sz));
    CHECKF(sz == (MPI_Offset)n * (MPI_Offset)sizeof buf, "size %lld", (long long)sz);
    int peer = (me + 1) % n;
    MPI_OK(MPI_File_read_at(fh, (MPI_Offset)peer * sizeof buf, rbuf, 100, MPI_INT, &st));
    for (int i = 0; i < 100; i++)
        CHECKF(rbuf[i] == peer * 1000 + i, "rbuf[%d] = %d", i, rbuf[i]);
    /* Reading past the end: a short count. */
    MPI_OK(MPI_File_read_at(fh, (MPI_Offset)n * sizeof buf - 8, rbuf, 10, MPI_INT, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECKF(cnt == 2, "count at end %d", cnt);
    MPI_OK(MPI_Get_elements(&st, MPI_INT, &cnt));
    CHECK(cnt == 2);

    /* Collective explicit offsets, _c counts. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < 100; i++)
        buf[i] = -(me * 1000 + i);
    MPI_OK(MPI_File_write_at_all_c(fh, (MPI_Offset)me * sizeof buf, buf, (MPI_Count)100, MPI_INT, &st));
    MPI_Count ccnt;
    MPI_OK(MPI_Get_count_c(&st, MPI_INT, &ccnt));
    CHECK(ccnt == 100);
    MPI_OK(MPI_File_read_at_all(fh, (MPI_Offset)peer * sizeof buf, rbuf, 100, MPI_INT, &st));
    for (int i = 0; i < 100; i++)
        CHECKF(rbuf[i] == -(peer * 1000 + i), "rbuf[%d] = %d", i, rbuf[i]);

    /* Individual pointers, seek, position, byte offset. */
    MPI_Offset pos;
    MPI_OK(MPI_File_seek(fh, (MPI_Offset)me * sizeof buf + 40, MPI_SEEK_SET));
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == (MPI_Offset)me * (MPI_Offset)sizeof buf + 40);
    MPI_OK(MPI_File_read(fh, rbuf, 5, MPI_INT, &st));
    CHECK(rbuf[0] == -(me * 1000 + 10) && rbuf[4] == -(me * 1000 + 14));
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == (MPI_Offset)me * (MPI_Offset)sizeof buf + 60);
    MPI_OK(MPI_File_seek(fh, -20, MPI_SEEK_CUR));
    int seven[5] = {7, 7, 7, 7, 7};
    MPI_OK(MPI_File_write(fh, seven, 5, MPI_INT, &st));
    MPI_OK(MPI_File_seek(fh, 0, MPI_SEEK_END));
    MPI_OK(MPI_File_get_position(fh, &pos));
    MPI_OK(MPI_File_get_size(fh, &sz));
    CHECK(pos == sz);
    MPI_Offset bo;
    MPI_OK(MPI_File_get_byte_offset(fh, 12, &bo));
    CHECK(bo == 12);
    EXPECT_CLASS(MPI_File_seek(fh, -1, MPI_SEEK_SET), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_File_seek(fh, 0, 12345), MPI_ERR_ARG);

    /* Collective individual-pointer forms. */
    MPI_OK(MPI_File_seek(fh, (MPI_Offset)me * sizeof buf, MPI_SEEK_SET));
    MPI_OK(MPI_File_read_all(fh, rbuf, 20, MPI_INT, &st));
    CHECK(rbuf[10] == 7 && rbuf[14] == 7 && rbuf[15] == -(me * 1000 + 15));

    /* Non-blocking forms: real requests through wait and test. */
    MPI_Request rq[3];
    int a = 11, b = 22, c = 33;
    MPI_OK(MPI_File_iwrite_at(fh, (MPI_Offset)me * sizeof buf, &a, 1, MPI_INT, &rq[0]));
    MPI_OK(MPI_File_iwrite_at_all(fh, (MPI_Offset)me * sizeof buf + 4, &b, 1, MPI_INT, &rq[1]));
    MPI_OK(MPI_File_seek(fh, (MPI_Offset)me * sizeof buf + 8, MPI_SEEK_SET));
    MPI_OK(MPI_File_iwrite_c(fh, &c, 1, MPI_INT, &rq[2]));
    MPI_Status sts[3];
    MPI_OK(MPI_Waitall(3, rq, sts));
    for (int i = 0; i < 3; i++) {
        MPI_OK(MPI_Get_count(&sts[i], MPI_INT, &cnt));
        CHECK(cnt == 1 && rq[i] == MPI_REQUEST_NULL);
    }
    int three[3] = {0, 0, 0};
    MPI_OK(MPI_File_iread_at(fh, (MPI_Offset)me * sizeof buf, three, 3, MPI_INT, &rq[0]));
    flag = 0;
    while (!flag)
        MPI_OK(MPI_Test(&rq[0], &flag, &st));
    CHECK(three[0] == 11 && three[1] == 22 && three[2] == 33);
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 3);
    MPI_OK(MPI_File_seek(fh, (MPI_Offset)me * sizeof buf, MPI_SEEK_SET));
    MPI_OK(MPI_File_iread_all(fh, three, 3, MPI_INT, &rq[0]));
    MPI_OK(MPI_Wait(&rq[0], &st));
    CHECK(three[2] == 33);

    /* Split collectives. */
    MPI_OK(MPI_File_read_at_all_begin(fh, (MPI_Offset)me * sizeof buf, three, 3, MPI_INT));
    EXPECT_CLASS(MPI_File_read_at_all_begin(fh, 0, three, 3, MPI_INT), MPI_ERR_IO);
    MPI_OK(MPI_File_read_at_all_end(fh, three, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 3 && three[1] == 22);
    EXPECT_CLASS(MPI_File_write_all_end(fh, three, &st), MPI_ERR_IO);
    MPI_OK(MPI_File_seek(fh, (MPI_Offset)me * sizeof buf, MPI_SEEK_SET));
    int forty[2] = {40, 41};
    MPI_OK(MPI_File_write_all_begin(fh, forty, 2, MPI_INT));
    MPI_OK(MPI_File_write_all_end(fh, forty, &st));

    /* Atomicity. */
    MPI_OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0);
    MPI_OK(MPI_File_set_atomicity(fh, 1));
    MPI_OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 1);
    MPI_OK(MPI_File_write_at(fh, (MPI_Offset)me * sizeof buf + 8, &a, 1, MPI_INT, &st));
    MPI_OK(MPI_File_set_atomicity(fh, 0));

    /* set_size, preallocate. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_preallocate(fh, (MPI_Offset)n * sizeof buf + 1000));
    MPI_OK(MPI_File_get_size(fh, &sz));
    CHECK(sz >= (MPI_Offset)n * (MPI_Offset)sizeof buf + 1000);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_set_size(fh, (MPI_Offset)n * sizeof buf));
    MPI_OK(MPI_File_get_size(fh, &sz));
    CHECK(sz == (MPI_Offset)n * (MPI_Offset)sizeof buf);

    /* Error handlers on a file. */
    MPI_Errhandler mine;
    MPI_OK(MPI_File_create_errhandler(file_handler, &mine));
    MPI_OK(MPI_File_set_errhandler(fh, mine));
    int rc = MPI_File_read_at(fh, -5, rbuf, 1, MPI_INT, &st);
    CHECK(err_class(rc) == MPI_ERR_ARG && handler_calls == 1 && handler_code == rc);
    MPI_OK(MPI_File_call_errhandler(fh, MPI_ERR_IO));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_IO);
    MPI_OK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Errhandler_free(&mine));

    MPI_OK(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL);
    EXPECT_CLASS(MPI_File_get_size(fh, &sz), MPI_ERR_FILE);

    /* What the file holds, read with POSIX. */
    if (me == 0) {
        unsigned char *data;
        long len = posix_slurp(pbuf, &data);
        CHECKF(len == (long)(n * sizeof buf), "posix length %ld", len);
        for (int r = 0; r < n; r++) {
            int *x = (int *)(data + r * sizeof buf);
            CHECKF(x[0] == 40 && x[1] == 41 && x[2] == 11, "rank %d block %d %d %d", r, x[0], x[1], x[2]);
            CHECK(x[10] == 7 && x[14] == 7);
            CHECKF(x[50] == -(r * 1000 + 50), "x[50] = %d", x[50]);
        }
        free(data);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Read-only: writes fail with MPI_ERR_READ_ONLY; EXCL on an existing file fails. */
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_write_at(fh, 0, buf, 1, MPI_INT, &st), MPI_ERR_READ_ONLY);
    EXPECT_CLASS(MPI_File_read_at(fh, 0, buf, -1, MPI_INT, &st), MPI_ERR_COUNT);
    MPI_OK(MPI_File_close(&fh));
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY,
                               MPI_INFO_NULL, &fh),
                 MPI_ERR_FILE_EXISTS);

    /* APPEND starts at the end; DELETE_ON_CLOSE removes the file. */
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, pbuf, MPI_MODE_WRONLY | MPI_MODE_APPEND | MPI_MODE_DELETE_ON_CLOSE,
                         MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_get_position(fh, &pos));
    CHECK(pos == (MPI_Offset)n * (MPI_Offset)sizeof buf);
    EXPECT_CLASS(MPI_File_read_at(fh, 0, buf, 1, MPI_INT, &st), MPI_ERR_ACCESS);
    MPI_OK(MPI_File_close(&fh));
    CHECK(access(pbuf, F_OK) != 0);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* MPI_File_delete. */
    if (me == 0) {
        MPI_OK(MPI_File_open(MPI_COMM_SELF, pbuf, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
        MPI_OK(MPI_File_close(&fh));
        MPI_OK(MPI_File_delete(pbuf, MPI_INFO_NULL));
        EXPECT_CLASS(MPI_File_delete(pbuf, MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK basic\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
