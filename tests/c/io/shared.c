/* shared.c - the shared file pointer: every rank appends records with
 * write_shared (each record lands exactly once, none overlap),
 * write_ordered/read_ordered (rank order), seek_shared and
 * get_position_shared, the non-blocking and split forms, and
 * MPI_MODE_SEQUENTIAL. 1 or more ranks. */
#include "common_io.h"

int main(int argc, char **argv)
{
    io_init(&argc, &argv);
    int me = t_rank, n = t_size;
    MPI_File fh;
    MPI_Status st;
    int cnt;
    char p[1024];
    snprintf(p, sizeof p, "%s", path_of("shared.dat"));
    enum { REC = 8, NREC = 20 };
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_Offset sp;
    MPI_OK(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == 0);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < NREC; i++) {
        int rec[REC];
        for (int k = 0; k < REC; k++)
            rec[k] = me * 1000 + i;
        MPI_OK(MPI_File_write_shared(fh, rec, REC, MPI_INT, &st));
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == REC);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_get_position_shared(fh, &sp));
    CHECKF(sp == (MPI_Offset)(n * NREC * REC * sizeof(int)), "shared position %lld", (long long)sp);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        unsigned char *d;
        long len = posix_slurp(p, &d);
        CHECK(len == (long)(n * NREC * REC * sizeof(int)));
        int *seen = calloc(n * NREC, sizeof(int));
        for (int r = 0; r < n * NREC; r++) {
            int *rec = (int *)d + r * REC;
            for (int k = 1; k < REC; k++)
                CHECKF(rec[k] == rec[0], "record %d torn", r);
            int who = rec[0] / 1000, i = rec[0] % 1000;
            CHECK(who >= 0 && who < n && i < NREC);
            seen[who * NREC + i]++;
        }
        for (int r = 0; r < n * NREC; r++)
            CHECKF(seen[r] == 1, "record %d seen %d times", r, seen[r]);
        free(seen);
        free(d);
    }

    /* Ordered: rank r writes r + 1 ints after the records. */
    MPI_Offset base = (MPI_Offset)n * NREC * REC * sizeof(int);
    int ord[64];
    for (int k = 0; k <= me; k++)
        ord[k] = me;
    MPI_OK(MPI_File_write_ordered(fh, ord, me + 1, MPI_INT, &st));
    MPI_OK(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == base + (MPI_Offset)(n * (n + 1) / 2) * (MPI_Offset)sizeof(int));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_seek_shared(fh, base, MPI_SEEK_SET));
    int back[64];
    memset(back, -1, sizeof back);
    MPI_OK(MPI_File_read_ordered(fh, back, me + 1, MPI_INT, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == me + 1);
    for (int k = 0; k <= me; k++)
        CHECKF(back[k] == me, "ordered back[%d] = %d", k, back[k]);
    /* Split ordered and non-blocking shared forms. */
    MPI_OK(MPI_File_seek_shared(fh, -(MPI_Offset)sizeof(int), MPI_SEEK_END));
    MPI_OK(MPI_File_read_ordered_begin(fh, back, 1, MPI_INT));
    MPI_OK(MPI_File_read_ordered_end(fh, back, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECKF(cnt == (me == 0 ? 1 : 0), "rank %d read %d past the end", me, cnt);
    if (me == 0)
        CHECK(back[0] == n - 1);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_END));
    MPI_Request rq;
    int v = 500 + me;
    MPI_OK(MPI_File_iwrite_shared(fh, &v, 1, MPI_INT, &rq));
    MPI_OK(MPI_Wait(&rq, &st));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Offset sz;
    MPI_OK(MPI_File_get_size(fh, &sz));
    CHECK(sz == base + (MPI_Offset)(n * (n + 1) / 2 + n) * (MPI_Offset)sizeof(int));
    MPI_OK(MPI_File_seek_shared(fh, -(MPI_Offset)n * (MPI_Offset)sizeof(int), MPI_SEEK_END));
    int got = -1;
    MPI_OK(MPI_File_iread_shared(fh, &got, 1, MPI_INT, &rq));
    MPI_OK(MPI_Wait(&rq, &st));
    CHECK(got >= 500 && got < 500 + n);
    /* An invalid whence: an error (at least where the pointer lives: MPICH reports it on
     * rank 0 only). */
    int bad = err_class(MPI_File_seek_shared(fh, 0, 99)) == MPI_ERR_ARG, anybad = 0;
    MPI_OK(MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    CHECK(anybad);
    MPI_OK(MPI_File_close(&fh));

    /* Sequential mode: shared pointer only. */
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL | MPI_MODE_APPEND, MPI_INFO_NULL,
                         &fh));
    EXPECT_CLASS(MPI_File_write_at(fh, 0, &v, 1, MPI_INT, &st), MPI_ERR_UNSUPPORTED_OPERATION);
    EXPECT_CLASS(MPI_File_seek(fh, 0, MPI_SEEK_SET), MPI_ERR_UNSUPPORTED_OPERATION);
    MPI_OK(MPI_File_write_ordered(fh, &v, 1, MPI_INT, &st));
    MPI_OK(MPI_File_close(&fh));
    if (me == 0) {
        unsigned char *d;
        long len = posix_slurp(p, &d);
        CHECK(len == sz + n * (long)sizeof(int));
        for (int r = 0; r < n; r++)
            CHECK(((int *)(d + sz))[r] == 500 + r);
        free(d);
        /* The side file of the shared pointer is gone. */
        char side[1100];
        snprintf(side, sizeof side, "%s/.shared.dat.madmpi-shfp", t_dir);
        CHECK(access(side, F_OK) != 0);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        printf("OK shared\n");
    MPI_OK(MPI_Finalize());
    return 0;
}
