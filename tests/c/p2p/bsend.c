/* bsend.c - buffered sends: Bsend / Ibsend through an attached buffer
 * (messages complete before the receiver posts anything), Buffer_detach
 * returns the buffer and waits for pending buffered messages (the buffer is
 * scribbled over right after detach and the receiver still gets the right
 * bytes), MPI_ERR_BUFFER when the buffer is too small or missing, large
 * buffered messages, the _c variants; a buffer of exactly MPI_Pack_size +
 * MPI_BSEND_OVERHEAD per message suffices; a failed buffered send leaves the
 * buffer free to detach and attach again; a buffer filled by large messages
 * is whole again for the next round once the receiver has them all and a
 * barrier says so (MPICH's threads/pt2pt/mt_ibsendirecv_huge found that the
 * receiver's notices could still wait in the sender's input).  Exactly 2
 * ranks. */
#include "common.h"

#define NSMALL 20
#define SMALL 1000
#define LARGE (600 * 1024)
#define ROUNDS 12
#define NFULL 6
#define FULL (1024 * 1024)

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    unsigned char *msg = xmalloc(LARGE);
    MPI_Status st;

    /* 1. Many buffered messages completing with no receive posted. */
    int bsize = NSMALL * (SMALL + MPI_BSEND_OVERHEAD) + 2 * (LARGE + MPI_BSEND_OVERHEAD);
    unsigned char *bbuf = xmalloc((size_t)bsize);
    MPI_OK(MPI_Buffer_attach(bbuf, bsize));
    if (t_rank == 0) {
        for (int i = 0; i < NSMALL; i++) {
            fill(msg, SMALL, (unsigned)i, 1);
            if (i % 2) {
                MPI_OK(MPI_Bsend(msg, SMALL, MPI_BYTE, 1, i, MPI_COMM_WORLD));
            } else {
                MPI_Request r;
                MPI_OK(MPI_Ibsend(msg, SMALL, MPI_BYTE, 1, i, MPI_COMM_WORLD, &r));
                MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            }
            memset(msg, 0xee, SMALL); /* the data was copied */
        }
        fill(msg, LARGE, 100, 1);
        MPI_OK(MPI_Bsend_c(msg, (MPI_Count)LARGE, MPI_BYTE, 1, 100, MPI_COMM_WORLD));
        memset(msg, 0xee, LARGE);
        fill(msg, LARGE, 101, 1);
        MPI_Request r;
        MPI_OK(MPI_Ibsend_c(msg, (MPI_Count)LARGE, MPI_BYTE, 1, 101, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        memset(msg, 0xee, LARGE);
        /* Every send completed locally: tell the receiver to start. */
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 999, MPI_COMM_WORLD));
    } else {
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = NSMALL - 1; i >= 0; i--) {
            MPI_OK(MPI_Recv(msg, SMALL, MPI_BYTE, 0, i, MPI_COMM_WORLD, &st));
            CHECKF(verify(msg, SMALL, (unsigned)i, 1) < 0, "buffered message %d", i);
        }
        for (int t = 100; t <= 101; t++) {
            MPI_OK(MPI_Recv(msg, LARGE, MPI_BYTE, 0, t, MPI_COMM_WORLD, &st));
            CHECKF(verify(msg, LARGE, (unsigned)t, 1) < 0, "large buffered message %d", t);
        }
    }

    /* Rank 1 has received everything: the space is free again once rank 0
     * has seen that (an MPI call's progress). */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 2. Detach waits for pending buffered messages. */
    if (t_rank == 0) {
        fill(msg, LARGE, 200, 2);
        MPI_OK(MPI_Bsend(msg, LARGE, MPI_BYTE, 1, 200, MPI_COMM_WORLD));
        fill(msg, SMALL, 201, 2);
        MPI_OK(MPI_Bsend(msg, SMALL, MPI_BYTE, 1, 201, MPI_COMM_WORLD));
    }
    void *det = NULL;
    int dsize = 0;
    MPI_OK(MPI_Buffer_detach(&det, &dsize));
    CHECK(det == bbuf && dsize == bsize);
    memset(bbuf, 0x55, (size_t)bsize); /* the messages must have left */
    if (t_rank == 1) {
        double t0 = MPI_Wtime();
        while (MPI_Wtime() - t0 < 0.2) {
        } /* let rank 0 sit in detach a while */
        MPI_OK(MPI_Recv(msg, LARGE, MPI_BYTE, 0, 200, MPI_COMM_WORLD, &st));
        CHECK(verify(msg, LARGE, 200, 2) < 0);
        MPI_OK(MPI_Recv(msg, SMALL, MPI_BYTE, 0, 201, MPI_COMM_WORLD, &st));
        CHECK(verify(msg, SMALL, 201, 2) < 0);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 3. Errors: no buffer, too small a buffer. */
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    if (t_rank == 0) {
        EXPECT_CLASS(MPI_Bsend(msg, SMALL, MPI_BYTE, 1, 300, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        unsigned char small[64 + MPI_BSEND_OVERHEAD];
        MPI_OK(MPI_Buffer_attach(small, (int)sizeof small));
        EXPECT_CLASS(MPI_Bsend(msg, SMALL, MPI_BYTE, 1, 301, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        MPI_Request r = MPI_REQUEST_NULL;
        EXPECT_CLASS(MPI_Ibsend(msg, SMALL, MPI_BYTE, 1, 302, MPI_COMM_WORLD, &r), MPI_ERR_BUFFER);
        /* a message that fits still goes */
        int v = 303;
        MPI_OK(MPI_Bsend(&v, 1, MPI_INT, 1, 303, MPI_COMM_WORLD));
        MPI_OK(MPI_Buffer_detach(&det, &dsize));
        CHECK(det == small && dsize == (int)sizeof small);
        /* detaching with nothing attached (madmpi and MPICH: NULL, 0) */
        if (is_madmpi()) {
            MPI_OK(MPI_Buffer_detach(&det, &dsize));
            CHECK(det == NULL && dsize == 0);
        }
        MPI_Count csize = 0;
        MPI_OK(MPI_Buffer_attach_c(bbuf, (MPI_Count)bsize));
        MPI_OK(MPI_Buffer_detach_c(&det, &csize));
        CHECK(det == bbuf && csize == bsize);
    } else {
        int v = 0;
        MPI_OK(MPI_Recv(&v, 1, MPI_INT, 0, 303, MPI_COMM_WORLD, &st));
        CHECK(v == 303);
    }

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 4. A buffer of exactly MPI_Pack_size + MPI_BSEND_OVERHEAD suffices, for
     * every size (1..20 bytes: most not multiples of 8), and a buffer of the
     * sum of those for several messages outstanding at once (none received
     * until all are sent). */
    if (t_rank == 0) {
        for (int n = 1; n <= 20; n++) {
            int ps = 0;
            MPI_OK(MPI_Pack_size(n, MPI_BYTE, MPI_COMM_WORLD, &ps));
            int sz = ps + MPI_BSEND_OVERHEAD;
            unsigned char *b = xmalloc((size_t)sz);
            MPI_OK(MPI_Buffer_attach(b, sz));
            fill(msg, (size_t)n, 400, (unsigned)n);
            MPI_OK(MPI_Bsend(msg, n, MPI_BYTE, 1, 400 + n, MPI_COMM_WORLD));
            MPI_OK(MPI_Buffer_detach(&det, &dsize));
            CHECK(det == b && dsize == sz);
            free(b);
        }
        const int ints[2] = {1, 3};
        for (int k = 0; k < 2; k++) {
            int ps = 0;
            MPI_OK(MPI_Pack_size(ints[k], MPI_INT, MPI_COMM_WORLD, &ps));
            int sz = ps + MPI_BSEND_OVERHEAD;
            unsigned char *b = xmalloc((size_t)sz);
            MPI_OK(MPI_Buffer_attach(b, sz));
            int v[3] = {500 + k, 501 + k, 502 + k};
            MPI_OK(MPI_Bsend(v, ints[k], MPI_INT, 1, 500 + k, MPI_COMM_WORLD));
            MPI_OK(MPI_Buffer_detach(&det, &dsize));
            free(b);
        }
        /* Many at once: 1..20 bytes, then 1 and 3 ints, all in one buffer. */
        int total = 0;
        for (int n = 1; n <= 20; n++) {
            int ps = 0;
            MPI_OK(MPI_Pack_size(n, MPI_BYTE, MPI_COMM_WORLD, &ps));
            total += ps + MPI_BSEND_OVERHEAD;
        }
        for (int k = 0; k < 2; k++) {
            int ps = 0;
            MPI_OK(MPI_Pack_size(ints[k], MPI_INT, MPI_COMM_WORLD, &ps));
            total += ps + MPI_BSEND_OVERHEAD;
        }
        unsigned char *b = xmalloc((size_t)total);
        MPI_OK(MPI_Buffer_attach(b, total));
        for (int n = 1; n <= 20; n++) {
            fill(msg, (size_t)n, 600, (unsigned)n);
            MPI_OK(MPI_Bsend(msg, n, MPI_BYTE, 1, 600 + n, MPI_COMM_WORLD));
        }
        for (int k = 0; k < 2; k++) {
            int v[3] = {700 + k, 701 + k, 702 + k};
            MPI_OK(MPI_Bsend(v, ints[k], MPI_INT, 1, 700 + k, MPI_COMM_WORLD));
        }
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 998, MPI_COMM_WORLD));
        MPI_OK(MPI_Buffer_detach(&det, &dsize));
        CHECK(det == b && dsize == total);
        free(b);
    } else {
        for (int n = 1; n <= 20; n++) {
            MPI_OK(MPI_Recv(msg, n, MPI_BYTE, 0, 400 + n, MPI_COMM_WORLD, &st));
            CHECKF(verify(msg, (size_t)n, 400, (unsigned)n) < 0, "exact buffer, %d bytes", n);
        }
        for (int k = 0; k < 2; k++) {
            int v[3] = {0, 0, 0};
            MPI_OK(MPI_Recv(v, 3, MPI_INT, 0, 500 + k, MPI_COMM_WORLD, &st));
            CHECK(v[0] == 500 + k && (k == 0 || v[2] == 502 + k));
        }
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 998, MPI_COMM_WORLD, &st));
        for (int n = 20; n >= 1; n--) {
            MPI_OK(MPI_Recv(msg, n, MPI_BYTE, 0, 600 + n, MPI_COMM_WORLD, &st));
            CHECKF(verify(msg, (size_t)n, 600, (unsigned)n) < 0, "shared buffer, %d bytes", n);
        }
        for (int k = 0; k < 2; k++) {
            int v[3] = {0, 0, 0};
            MPI_OK(MPI_Recv(v, 3, MPI_INT, 0, 700 + k, MPI_COMM_WORLD, &st));
            CHECK(v[0] == 700 + k && (k == 0 || v[2] == 702 + k));
        }
    }

    /* 5. A buffered send that fails (no room) leaves nothing reserved: detach
     * returns at once and another buffer can be attached and used (the
     * blocking, the persistent and the non-blocking forms). */
    if (t_rank == 0) {
        int sz = 8 + MPI_BSEND_OVERHEAD;
        unsigned char *b = xmalloc((size_t)sz);
        MPI_OK(MPI_Buffer_attach(b, sz));
        EXPECT_CLASS(MPI_Bsend(msg, 9, MPI_BYTE, 1, 800, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        {
            /* The error string says what is wrong: no room, not a bad pointer. */
            int rc = MPI_Bsend(msg, 9, MPI_BYTE, 1, 800, MPI_COMM_WORLD);
            char s[MPI_MAX_ERROR_STRING];
            int l = 0;
            MPI_OK(MPI_Error_string(rc, s, &l));
            if (is_madmpi())
                CHECKF(strstr(s, "space") != NULL, "Bsend error string: %s", s);
        }
        MPI_Request pr = MPI_REQUEST_NULL;
        MPI_OK(MPI_Bsend_init(msg, 9, MPI_BYTE, 1, 801, MPI_COMM_WORLD, &pr));
        int rc = MPI_Start(&pr);
        CHECK(err_class(rc) == MPI_ERR_BUFFER);
        MPI_OK(MPI_Request_free(&pr));
        MPI_Request r = MPI_REQUEST_NULL;
        EXPECT_CLASS(MPI_Ibsend(msg, 9, MPI_BYTE, 1, 802, MPI_COMM_WORLD, &r), MPI_ERR_BUFFER);
        MPI_OK(MPI_Buffer_detach(&det, &dsize));
        CHECK(det == b && dsize == sz);
        MPI_OK(MPI_Buffer_attach(b, sz));
        fill(msg, 8, 803, 1);
        MPI_OK(MPI_Bsend(msg, 8, MPI_BYTE, 1, 803, MPI_COMM_WORLD));
        MPI_OK(MPI_Buffer_detach(&det, &dsize));
        CHECK(det == b && dsize == sz);
        free(b);
    } else {
        MPI_OK(MPI_Recv(msg, 8, MPI_BYTE, 0, 803, MPI_COMM_WORLD, &st));
        CHECK(verify(msg, 8, 803, 1) < 0);
    }

    /* 6. Rounds that fill the whole buffer with large (rendezvous) messages:
     * the receiver takes them all, then a barrier; each round needs all the
     * room of the previous one. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    {
        int fsize = NFULL * (FULL + MPI_BSEND_OVERHEAD);
        unsigned char *fbuf = xmalloc((size_t)fsize);
        unsigned char *data = xmalloc(FULL);
        MPI_Request rq[NFULL];
        MPI_OK(MPI_Buffer_attach(fbuf, fsize));
        for (int round = 0; round < ROUNDS; round++) {
            for (int i = 0; i < NFULL; i++) {
                unsigned seed = (unsigned)(round * NFULL + i);
                if (t_rank == 0) {
                    fill(data, FULL, seed, 3);
                    if (round % 3 == 2) {
                        MPI_OK(MPI_Bsend(data, FULL, MPI_BYTE, 1, 900 + i, MPI_COMM_WORLD));
                        rq[i] = MPI_REQUEST_NULL;
                    } else if (round % 3 == 1) {
                        MPI_OK(MPI_Bsend_init(data, FULL, MPI_BYTE, 1, 900 + i, MPI_COMM_WORLD,
                                              &rq[i]));
                        MPI_OK(MPI_Start(&rq[i]));
                        MPI_OK(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
                        MPI_OK(MPI_Request_free(&rq[i]));
                    } else {
                        MPI_OK(MPI_Ibsend(data, FULL, MPI_BYTE, 1, 900 + i, MPI_COMM_WORLD,
                                          &rq[i]));
                    }
                } else {
                    MPI_OK(MPI_Recv(data, FULL, MPI_BYTE, 0, 900 + i, MPI_COMM_WORLD, &st));
                    CHECKF(verify(data, FULL, seed, 3) < 0, "round %d, message %d", round, i);
                }
            }
            if (t_rank == 0)
                MPI_OK(MPI_Waitall(NFULL, rq, MPI_STATUSES_IGNORE));
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        }
        MPI_OK(MPI_Buffer_detach(&det, &dsize));
        CHECK(det == fbuf && dsize == fsize);
        free(data);
        free(fbuf);
    }

    free(bbuf);
    free(msg);
    t_done("bsend");
    return 0;
}
