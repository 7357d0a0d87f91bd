/* isendrecv.c - MPI_Isendrecv, MPI_Isendrecv_replace (+ _c) and
 * MPI_Request_get_status_any/some on any number of ranks.
 *
 * A ring shift in both directions with every completion call, contiguous and strided data,
 * a large message (rendezvous), MPI_PROC_NULL, truncation reported in the status, bad
 * arguments with the right error class; get_status_any/some leave requests alive.
 */
#include "../p2p/common.h"

#define N 1000
#define BIG (1 << 20)

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;

    /* Ring shift, waited with MPI_Wait. */
    int sbuf[N], rbuf[N];
    for (int i = 0; i < N; i++)
        sbuf[i] = t_rank * 100000 + i;
    MPI_Request r;
    MPI_Status st;
    MPI_OK(MPI_Isendrecv(sbuf, N, MPI_INT, next, 7, rbuf, N, MPI_INT, prev, 7, MPI_COMM_WORLD,
                         &r));
    MPI_OK(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 7);
    int cnt = -1;
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == N);
    for (int i = 0; i < N; i++)
        CHECKF(rbuf[i] == prev * 100000 + i, "rbuf[%d] = %d", i, rbuf[i]);

    /* Large, both directions at once, with MPI_Waitall; _c variant. */
    char *a = xmalloc(BIG), *b = xmalloc(BIG), *c = xmalloc(BIG), *d = xmalloc(BIG);
    fill(a, BIG, t_rank, 1);
    fill(c, BIG, t_rank, 2);
    MPI_Request rs[2];
    MPI_OK(MPI_Isendrecv_c(a, BIG, MPI_CHAR, next, 1, b, BIG, MPI_CHAR, prev, 1, MPI_COMM_WORLD,
                           &rs[0]));
    MPI_OK(MPI_Isendrecv(c, BIG, MPI_CHAR, prev, 2, d, BIG, MPI_CHAR, next, 2, MPI_COMM_WORLD,
                         &rs[1]));
    MPI_Status sts[2];
    MPI_OK(MPI_Waitall(2, rs, sts));
    CHECK(verify(b, BIG, prev, 1) < 0);
    CHECK(verify(d, BIG, next, 2) < 0);
    CHECK(sts[0].MPI_SOURCE == prev && sts[1].MPI_SOURCE == next);

    /* Replace, contiguous, tested with MPI_Test. */
    int v[N];
    for (int i = 0; i < N; i++)
        v[i] = t_rank + i;
    MPI_OK(MPI_Isendrecv_replace(v, N, MPI_INT, next, 3, prev, 3, MPI_COMM_WORLD, &r));
    int flag = 0;
    while (!flag)
        MPI_OK(MPI_Test(&r, &flag, &st));
    for (int i = 0; i < N; i++)
        CHECK(v[i] == prev + i);

    /* Replace with a strided type: the gaps keep their values; _c variant; Waitany. */
    MPI_Datatype vec;
    MPI_OK(MPI_Type_vector(100, 1, 3, MPI_INT, &vec));
    MPI_OK(MPI_Type_commit(&vec));
    int w[300];
    for (int i = 0; i < 300; i++)
        w[i] = (i % 3 == 0) ? t_rank * 1000 + i : -i;
    MPI_OK(MPI_Isendrecv_replace_c(w, 1, vec, prev, 4, next, 4, MPI_COMM_WORLD, &r));
    int idx = -1;
    MPI_OK(MPI_Waitany(1, &r, &idx, &st));
    CHECK(idx == 0 && r == MPI_REQUEST_NULL);
    for (int i = 0; i < 300; i++)
        CHECKF(w[i] == ((i % 3 == 0) ? next * 1000 + i : -i), "w[%d] = %d", i, w[i]);
    MPI_OK(MPI_Type_free(&vec));

    /* MPI_PROC_NULL on both sides. */
    rbuf[0] = 12345;
    MPI_OK(MPI_Isendrecv(sbuf, N, MPI_INT, MPI_PROC_NULL, 0, rbuf, N, MPI_INT, MPI_PROC_NULL, 0,
                         MPI_COMM_WORLD, &r));
    MPI_OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && rbuf[0] == 12345);

    /* Truncation: the status (and the completion call) say MPI_ERR_TRUNCATE. */
    MPI_OK(MPI_Isendrecv(sbuf, 10, MPI_INT, next, 5, rbuf, 5, MPI_INT, prev, 5, MPI_COMM_WORLD,
                         &r));
    EXPECT_CLASS(MPI_Wait(&r, &st), MPI_ERR_TRUNCATE);

    /* Bad arguments. */
    EXPECT_CLASS(MPI_Isendrecv(sbuf, 1, MPI_INT, t_size, 0, rbuf, 1, MPI_INT, prev, 0,
                               MPI_COMM_WORLD, &r),
                 MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Isendrecv(sbuf, 1, MPI_INT, next, 0, rbuf, 1, MPI_INT, t_size + 3, 0,
                               MPI_COMM_WORLD, &r),
                 MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Isendrecv(sbuf, -1, MPI_INT, next, 0, rbuf, 1, MPI_INT, prev, 0,
                               MPI_COMM_WORLD, &r),
                 MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Isendrecv(sbuf, 1, MPI_INT, next, -5, rbuf, 1, MPI_INT, prev, 0,
                               MPI_COMM_WORLD, &r),
                 MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Isendrecv_replace(v, 1, MPI_DATATYPE_NULL, next, 0, prev, 0, MPI_COMM_WORLD,
                                       &r),
                 MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Isendrecv_replace(v, 1, MPI_INT, next, 0, prev, 0, MPI_COMM_NULL, &r),
                 MPI_ERR_COMM);
    /* Nothing was left posted by the failed calls: a plain exchange still matches. */
    MPI_OK(MPI_Sendrecv(sbuf, 1, MPI_INT, next, 0, rbuf, 1, MPI_INT, prev, 0, MPI_COMM_WORLD,
                        &st));
    CHECK(rbuf[0] == prev * 100000);

    /* MPI_Request_get_status_any/some: requests stay alive until waited. */
    MPI_Request q[3];
    int x = t_rank, y = -1;
    MPI_OK(MPI_Irecv(&y, 1, MPI_INT, prev, 9, MPI_COMM_WORLD, &q[0]));
    q[1] = MPI_REQUEST_NULL;
    MPI_OK(MPI_Irecv(&y, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[2]));
    idx = -1;
    flag = 0;
    MPI_OK(MPI_Request_get_status_any(3, q, &idx, &flag, &st));
    /* q[2] is complete; q[0] too if prev has gone on to send already. */
    CHECKF(flag == 1 && ((idx == 2 && st.MPI_SOURCE == MPI_PROC_NULL) ||
                         (idx == 0 && st.MPI_SOURCE == prev)),
           "flag %d idx %d source %d", flag, idx, st.MPI_SOURCE);
    CHECK(q[0] != MPI_REQUEST_NULL && q[2] != MPI_REQUEST_NULL);
    MPI_OK(MPI_Send(&x, 1, MPI_INT, next, 9, MPI_COMM_WORLD));
    int outc = 0, ids[3];
    MPI_Status ss[3];
    do {
        MPI_OK(MPI_Request_get_status_some(3, q, &outc, ids, ss));
    } while (outc < 2);
    CHECK(outc == 2 && ids[0] == 0 && ids[1] == 2);
    CHECK(ss[0].MPI_SOURCE == prev && ss[0].MPI_TAG == 9);
    CHECK(q[0] != MPI_REQUEST_NULL && y == prev);
    MPI_OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    CHECK(q[0] == MPI_REQUEST_NULL && q[2] == MPI_REQUEST_NULL);
    /* Nothing active: flag true, MPI_UNDEFINED. */
    MPI_OK(MPI_Request_get_status_any(3, q, &idx, &flag, &st));
    CHECK(flag == 1 && idx == MPI_UNDEFINED);
    MPI_OK(MPI_Request_get_status_some(3, q, &outc, ids, MPI_STATUSES_IGNORE));
    CHECK(outc == MPI_UNDEFINED);
    MPI_OK(MPI_Request_get_status_any(0, NULL, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1 && idx == MPI_UNDEFINED);
    /* A freed handle is an error. */
    MPI_Request stale;
    MPI_OK(MPI_Isend(&x, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &stale));
    MPI_Request copy = stale;
    MPI_OK(MPI_Wait(&stale, MPI_STATUS_IGNORE));
    if (is_madmpi())
        EXPECT_CLASS(MPI_Request_get_status_any(1, &copy, &idx, &flag, &st), MPI_ERR_REQUEST);

    free(a);
    free(b);
    free(c);
    free(d);
    t_done("isendrecv");
    return 0;
}
