/* disconnect.c - MPI_Comm_disconnect on communicators of one job: after
 * point-to-point traffic (eager, rendezvous, buffered, a freed send), after
 * collectives, on an intercommunicator; attributes' delete callbacks run; the
 * handle becomes MPI_COMM_NULL; the predefined communicators and
 * MPI_COMM_NULL are refused with MPI_ERR_COMM.
 */
#include "../p2p/common.h"

static int deleted;

static int delete_fn(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    CHECK(value == (void *)&deleted);
    deleted++;
    return MPI_SUCCESS;
}

#define BIG (1 << 20)

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;

    /* Traffic of every kind on a duplicate, then disconnect. */
    for (int round = 0; round < 3; round++) {
        MPI_Comm c;
        MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        int keyval;
        MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &keyval, NULL));
        MPI_OK(MPI_Comm_set_attr(c, keyval, &deleted));
        char *out = malloc(BIG), *in = malloc(BIG);
        CHECK(out && in);
        for (int i = 0; i < BIG; i++)
            out[i] = (char)pat((size_t)i, (unsigned)t_rank, (unsigned)round);
        MPI_Request r[4];
        MPI_OK(MPI_Irecv(in, BIG, MPI_CHAR, left, 1, c, &r[0]));
        MPI_OK(MPI_Isend(out, BIG, MPI_CHAR, right, 1, c, &r[1]));
        int small_out = t_rank * 10 + round, small_in = -1;
        MPI_OK(MPI_Irecv(&small_in, 1, MPI_INT, left, 2, c, &r[2]));
        MPI_OK(MPI_Isend(&small_out, 1, MPI_INT, right, 2, c, &r[3]));
        MPI_OK(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
        CHECK(small_in == left * 10 + round);
        for (int i = 0; i < BIG; i++)
            CHECK(in[i] == (char)pat((size_t)i, (unsigned)left, (unsigned)round));
        /* A buffered send and a freed send, both received (matched) before the disconnect. */
        int bufsize = 4096 + MPI_BSEND_OVERHEAD;
        void *buf = malloc((size_t)bufsize);
        MPI_OK(MPI_Buffer_attach(buf, bufsize));
        int b_out = 1000 + t_rank, b_in = -1, f_out = 2000 + t_rank, f_in = -1;
        MPI_OK(MPI_Bsend(&b_out, 1, MPI_INT, right, 3, c));
        MPI_Request fr;
        MPI_OK(MPI_Isend(&f_out, 1, MPI_INT, right, 4, c, &fr));
        MPI_OK(MPI_Request_free(&fr));
        MPI_OK(MPI_Recv(&b_in, 1, MPI_INT, left, 3, c, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Recv(&f_in, 1, MPI_INT, left, 4, c, MPI_STATUS_IGNORE));
        CHECK(b_in == 1000 + left && f_in == 2000 + left);
        int sum = 0;
        MPI_OK(MPI_Allreduce(&t_rank, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == t_size * (t_size - 1) / 2);
        MPI_Request ib;
        MPI_OK(MPI_Ibarrier(c, &ib));
        MPI_OK(MPI_Wait(&ib, MPI_STATUS_IGNORE));

        int before = deleted;
        MPI_OK(MPI_Comm_disconnect(&c));
        CHECK(c == MPI_COMM_NULL);
        CHECK(deleted == before + 1);
        MPI_OK(MPI_Comm_free_keyval(&keyval));
        int sz;
        MPI_OK(MPI_Buffer_detach(&buf, &sz));
        free(buf);
        free(out);
        free(in);
    }

    /* An intercommunicator between the even and the odd ranks. */
    if (t_size >= 2) {
        MPI_Comm half, inter;
        MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_rank, &half));
        MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, t_rank % 2 ? 0 : 1, 7, &inter));
        int rsize;
        MPI_OK(MPI_Comm_remote_size(inter, &rsize));
        CHECK(rsize == (t_rank % 2 ? t_size / 2 + t_size % 2 : t_size / 2));
        /* The two leaders (world ranks 0 and 1) exchange; the rest only disconnect. */
        if (t_rank < 2) {
            int v = t_rank, got = -1;
            MPI_OK(MPI_Sendrecv(&v, 1, MPI_INT, 0, 5, &got, 1, MPI_INT, 0, 5, inter,
                                MPI_STATUS_IGNORE));
            CHECK(got == 1 - t_rank);
        }
        MPI_OK(MPI_Comm_disconnect(&inter));
        CHECK(inter == MPI_COMM_NULL);
        MPI_OK(MPI_Comm_disconnect(&half));
        CHECK(half == MPI_COMM_NULL);
    }

    /* What cannot be disconnected. */
    MPI_Comm w = MPI_COMM_WORLD, s = MPI_COMM_SELF, n = MPI_COMM_NULL;
    EXPECT_CLASS(MPI_Comm_disconnect(&w), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_disconnect(&s), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_disconnect(&n), MPI_ERR_COMM);
    CHECK(w == MPI_COMM_WORLD && s == MPI_COMM_SELF);
    t_done("disconnect");
    return 0;
}
