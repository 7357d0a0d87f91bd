/* truncate.c - a message longer than the receive buffer: MPI_ERR_TRUNCATE
 * from Recv, Wait, Waitany and Sendrecv, MPI_ERR_IN_STATUS from Waitall /
 * Testall / Waitsome, the bytes that fit are delivered, and MPI_ERROR is
 * set.  Small (eager), larger eager (over TCP received straight into the
 * receive buffer) and large (rendezvous) messages.  MPI_Waitall reports
 * MPI_ERR_IN_STATUS to the handler of the failed request's communicator.
 * Exactly 2 ranks. */
#include "common.h"

#define BIG (1 << 20)

/* The handler of the communicator of the failed request in the last part. */
static MPI_Comm handled_comm = MPI_COMM_NULL;
static int handled_code = MPI_SUCCESS;

static void record_errh(MPI_Comm *comm, int *code, ...)
{
    handled_comm = *comm;
    handled_code = *code;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    unsigned char *buf = xmalloc(BIG);
    static const size_t sizes[] = {100, 40000, BIG};
    MPI_Status st;
    int cnt;
    int madmpi = is_madmpi();

    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        size_t fit = n / 4;
        if (t_rank == 0) {
            /* 1. Recv */
            memset(buf, 0, n);
            st.MPI_ERROR = -1;
            int rc = MPI_Recv(buf, (int)fit, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &st);
            CHECKF(err_class(rc) == MPI_ERR_TRUNCATE, "size %zu: rc %d", n, rc);
            /* The standard leaves MPI_ERROR of single completions alone; madmpi
             * sets it on failure, MPICH does not. */
            CHECKF(!madmpi || err_class(st.MPI_ERROR) == MPI_ERR_TRUNCATE, "status error %d", st.MPI_ERROR);
            CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 1);
            /* The bytes that fit are delivered (madmpi; MPICH leaves them). */
            CHECKF(!madmpi || verify(buf, fit, 1, (unsigned)k) < 0, "truncated data wrong (size %zu)", n);
            CHECKF(buf[fit] == 0, "byte past the buffer written (size %zu)", n);
            {
                char s[MPI_MAX_ERROR_STRING];
                int len = 0;
                MPI_OK(MPI_Error_string(rc, s, &len));
                CHECK(len > 0);
            }

            /* 2. Irecv + Wait */
            MPI_Request r;
            memset(buf, 0, n);
            MPI_OK(MPI_Irecv(buf, (int)fit, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &r));
            rc = MPI_Wait(&r, &st);
            CHECK(err_class(rc) == MPI_ERR_TRUNCATE);
            CHECK(r == MPI_REQUEST_NULL);
            CHECK(!madmpi || err_class(st.MPI_ERROR) == MPI_ERR_TRUNCATE);
            CHECK(!madmpi || verify(buf, fit, 2, (unsigned)k) < 0);

            /* 3. Waitall: one good, one truncated, one null */
            MPI_Request rs[3];
            MPI_Status sts[3];
            unsigned char *good = xmalloc(n);
            MPI_OK(MPI_Irecv(good, (int)n, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &rs[0]));
            MPI_OK(MPI_Irecv(buf, (int)fit, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &rs[1]));
            rs[2] = MPI_REQUEST_NULL;
            for (int i = 0; i < 3; i++)
                sts[i].MPI_ERROR = -1;
            rc = MPI_Waitall(3, rs, sts);
            CHECKF(rc == MPI_ERR_IN_STATUS, "waitall rc %d", rc);
            CHECK(sts[0].MPI_ERROR == MPI_SUCCESS);
            CHECK(err_class(sts[1].MPI_ERROR) == MPI_ERR_TRUNCATE);
            CHECK(rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL);
            CHECK(verify(good, n, 3, (unsigned)k) < 0);
            MPI_OK(MPI_Get_count(&sts[0], MPI_BYTE, &cnt));
            CHECK((size_t)cnt == n);

            /* 4. Waitany */
            MPI_OK(MPI_Irecv(buf, (int)fit, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &rs[0]));
            int idx = -1;
            rc = MPI_Waitany(1, rs, &idx, &st);
            CHECK(err_class(rc) == MPI_ERR_TRUNCATE && idx == 0);

            /* 5. Testall until done: one truncated */
            MPI_OK(MPI_Irecv(buf, (int)fit, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &rs[0]));
            MPI_OK(MPI_Irecv(good, (int)n, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &rs[1]));
            int flag = 0;
            do {
                rc = MPI_Testall(2, rs, &flag, sts);
            } while (!flag && rc == MPI_SUCCESS);
            CHECKF(rc == MPI_ERR_IN_STATUS, "testall rc %d flag %d", rc, flag);
            /* madmpi reports the errors with the completion of all; MPICH may
             * report them before (flag 0). */
            if (madmpi) {
                CHECK(flag == 1);
                CHECK(err_class(sts[0].MPI_ERROR) == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS);
            } else {
                MPI_Waitall(2, rs, sts);
            }

            /* 6. Waitsome */
            MPI_OK(MPI_Irecv(buf, (int)fit, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &rs[0]));
            int outc = 0, ind[1];
            rc = MPI_Waitsome(1, rs, &outc, ind, sts);
            CHECK(rc == MPI_ERR_IN_STATUS && outc == 1 && ind[0] == 0);
            CHECK(err_class(sts[0].MPI_ERROR) == MPI_ERR_TRUNCATE);

            /* 7. Sendrecv with a truncated receive */
            int dummy = 0;
            rc = MPI_Sendrecv(&dummy, 1, MPI_INT, 1, 9, buf, (int)fit, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &st);
            CHECK(err_class(rc) == MPI_ERR_TRUNCATE);
            free(good);
        } else {
            for (int tag = 1; tag <= 8; tag++) {
                fill(buf, n, (unsigned)tag, (unsigned)k);
                MPI_OK(MPI_Send(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD));
            }
            int dummy;
            fill(buf, n, 9, (unsigned)k);
            MPI_OK(MPI_Sendrecv(buf, (int)n, MPI_BYTE, 0, 9, &dummy, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &st));
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    /* MPI_ERR_IN_STATUS goes to the handler of the first failed request's
     * communicator (not MPI_COMM_WORLD's, nor MPI_COMM_SELF's). */
    MPI_Comm c2;
    MPI_Errhandler eh;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    MPI_OK(MPI_Comm_create_errhandler(record_errh, &eh));
    MPI_OK(MPI_Comm_set_errhandler(c2, eh));
    if (t_rank == 0) {
        unsigned char a[8], b[4];
        MPI_Request rs[3];
        MPI_Status sts[3];
        MPI_OK(MPI_Irecv(a, 8, MPI_BYTE, 1, 40, MPI_COMM_WORLD, &rs[0]));
        rs[1] = MPI_REQUEST_NULL;
        MPI_OK(MPI_Irecv(b, 4, MPI_BYTE, 1, 41, c2, &rs[2]));
        int rc = MPI_Waitall(3, rs, sts);
        CHECKF(rc == MPI_ERR_IN_STATUS, "waitall rc %d", rc);
        int same = MPI_UNEQUAL;
        CHECK(handled_comm != MPI_COMM_NULL);
        if (handled_comm != MPI_COMM_NULL)
            MPI_OK(MPI_Comm_compare(handled_comm, c2, &same));
        CHECK(same == MPI_IDENT && handled_code == MPI_ERR_IN_STATUS);
        CHECK(sts[0].MPI_ERROR == MPI_SUCCESS && sts[1].MPI_ERROR == MPI_SUCCESS);
        CHECK(err_class(sts[2].MPI_ERROR) == MPI_ERR_TRUNCATE);
        CHECK(sts[1].MPI_SOURCE == MPI_ANY_SOURCE && sts[1].MPI_TAG == MPI_ANY_TAG);
        CHECK(sts[2].MPI_SOURCE == 1 && sts[2].MPI_TAG == 41);
        CHECK(rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL && rs[2] == MPI_REQUEST_NULL);
    } else {
        unsigned char a[8] = {0};
        MPI_OK(MPI_Send(a, 8, MPI_BYTE, 0, 40, MPI_COMM_WORLD));
        MPI_OK(MPI_Send(a, 8, MPI_BYTE, 0, 41, c2));
    }
    MPI_OK(MPI_Errhandler_free(&eh));
    MPI_OK(MPI_Comm_free(&c2));
    free(buf);
    t_done("truncate");
    return 0;
}
