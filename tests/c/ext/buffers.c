/* buffers.c - buffered-send buffers, MPI-4.1: MPI_BUFFER_AUTOMATIC, communicator buffers
 * (MPI_Comm_attach_buffer/detach_buffer + _c), MPI_Buffer_flush/iflush,
 * MPI_Comm_flush_buffer/iflush_buffer; attaching again after a detach (the same buffer and
 * another), errors. Ring traffic on any number of ranks.
 */
#include "../p2p/common.h"

#define MSG 10000
#define NMSG 50

/* Every rank sends `n` buffered messages of MSG bytes to next on `comm` and receives as many
 * from prev, posted first so that nothing waits for the receiver. */
static void ring(MPI_Comm comm, int n, unsigned tag, int flush)
{
    struct bsend_ring r = bsend_ring_begin(comm, n, MSG, tag);
    if (flush == 1)
        MPI_OK(MPI_Buffer_flush());
    else if (flush == 2)
        MPI_OK(MPI_Comm_flush_buffer(comm));
    else if (flush == 3) {
        MPI_Request f;
        MPI_OK(MPI_Buffer_iflush(&f));
        MPI_OK(MPI_Wait(&f, MPI_STATUS_IGNORE));
    } else if (flush == 4) {
        MPI_Request f;
        MPI_OK(MPI_Comm_iflush_buffer(comm, &f));
        MPI_OK(MPI_Wait(&f, MPI_STATUS_IGNORE));
        CHECK(f == MPI_REQUEST_NULL);
    }
    bsend_ring_end(&r);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    void *addr;
    int size;
    MPI_Count csize;

    /* Automatic: more than any fixed buffer would hold, no attach size to choose. */
    MPI_OK(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0));
    EXPECT_CLASS(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0), MPI_ERR_BUFFER);
    ring(MPI_COMM_WORLD, NMSG, 1, 1);
    ring(MPI_COMM_WORLD, NMSG, 2, 3);
    MPI_OK(MPI_Buffer_detach(&addr, &size));
    CHECK(addr == MPI_BUFFER_AUTOMATIC && size == 0);

    /* A user buffer; attach again after detach (the same one, then another). */
    int bsize = 4 * (MSG + MPI_BSEND_OVERHEAD);
    char *b1 = xmalloc((size_t)bsize), *b2 = xmalloc((size_t)bsize * 2);
    for (int round = 0; round < 3; round++) {
        char *b = round == 2 ? b2 : b1;
        int bs = round == 2 ? 2 * bsize : bsize;
        MPI_OK(MPI_Buffer_attach(b, bs));
        EXPECT_CLASS(MPI_Buffer_attach(b1, bsize), MPI_ERR_BUFFER);
        ring(MPI_COMM_WORLD, 4, 10 + (unsigned)round, 0);
        MPI_OK(MPI_Buffer_detach(&addr, &size));
        CHECK(addr == b && size == bs);
    }
    MPI_OK(MPI_Buffer_attach_c(b1, bsize));
    MPI_OK(MPI_Buffer_detach_c(&addr, &csize));
    CHECK(addr == b1 && csize == bsize);
    if (is_madmpi()) {
        /* Nothing attached: (NULL, 0), as MPICH. */
        MPI_OK(MPI_Buffer_detach(&addr, &size));
        CHECK(addr == NULL && size == 0);
    }
    /* Too small: MPI_ERR_BUFFER, and the buffer is still usable. */
    MPI_OK(MPI_Buffer_attach(b1, MSG / 2));
    char small[16] = {0};
    EXPECT_CLASS(MPI_Bsend(b2, MSG, MPI_CHAR, (t_rank + 1) % t_size, 20, MPI_COMM_WORLD),
                 MPI_ERR_BUFFER);
    MPI_Request rr;
    MPI_OK(MPI_Irecv(small + 8, 8, MPI_CHAR, (t_rank + t_size - 1) % t_size, 21, MPI_COMM_WORLD,
                     &rr));
    MPI_OK(MPI_Bsend(small, 8, MPI_CHAR, (t_rank + 1) % t_size, 21, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Buffer_detach(&addr, &size));
    CHECK(addr == b1 && size == MSG / 2);
    EXPECT_CLASS(MPI_Buffer_attach(b1, -1), MPI_ERR_ARG);

    /* A communicator's buffer takes precedence over the process's. */
    MPI_Comm dup;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0));
    MPI_OK(MPI_Comm_attach_buffer(dup, b1, MSG / 2));
    EXPECT_CLASS(MPI_Comm_attach_buffer(dup, b2, bsize), MPI_ERR_BUFFER);
    /* dup's buffer is too small for MSG bytes, the process's (automatic) is not. */
    EXPECT_CLASS(MPI_Bsend(b2, MSG, MPI_CHAR, (t_rank + 1) % t_size, 30, dup), MPI_ERR_BUFFER);
    ring(MPI_COMM_WORLD, 8, 31, 0);
    MPI_OK(MPI_Comm_detach_buffer(dup, &addr, &size));
    CHECK(addr == b1 && size == MSG / 2);
    MPI_OK(MPI_Comm_attach_buffer_c(dup, b2, 2 * bsize));
    ring(dup, 4, 32, 2);
    ring(dup, 4, 33, 4);
    MPI_OK(MPI_Comm_detach_buffer_c(dup, &addr, &csize));
    CHECK(addr == b2 && csize == 2 * bsize);
    MPI_OK(MPI_Comm_attach_buffer(dup, MPI_BUFFER_AUTOMATIC, 0));
    ring(dup, NMSG, 34, 4);
    MPI_OK(MPI_Comm_detach_buffer(dup, &addr, &size));
    CHECK(addr == MPI_BUFFER_AUTOMATIC && size == 0);
    /* Flushing a communicator without a buffer of its own: nothing to wait for. */
    MPI_OK(MPI_Comm_flush_buffer(dup));
    MPI_OK(MPI_Buffer_detach(&addr, &size));
    CHECK(addr == MPI_BUFFER_AUTOMATIC);

    /* Detach waits for the messages in flight: a large one, received after the detach. */
    int big = 1 << 20;
    char *bb = xmalloc((size_t)big + MPI_BSEND_OVERHEAD), *src = xmalloc((size_t)big),
         *dst = xmalloc((size_t)big);
    fill(src, (size_t)big, t_rank, 40);
    MPI_OK(MPI_Irecv(dst, big, MPI_CHAR, (t_rank + t_size - 1) % t_size, 40, MPI_COMM_WORLD,
                     &rr));
    MPI_OK(MPI_Buffer_attach(bb, big + MPI_BSEND_OVERHEAD));
    MPI_OK(MPI_Bsend(src, big, MPI_CHAR, (t_rank + 1) % t_size, 40, MPI_COMM_WORLD));
    MPI_OK(MPI_Buffer_detach(&addr, &size));
    CHECK(addr == bb);
    MPI_OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    CHECK(verify(dst, (size_t)big, (unsigned)((t_rank + t_size - 1) % t_size), 40) < 0);

    /* Errors. */
    EXPECT_CLASS(MPI_Comm_attach_buffer(MPI_COMM_NULL, b1, 10), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_flush_buffer(MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_detach_buffer(dup, NULL, &size), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Buffer_iflush(NULL), MPI_ERR_ARG);

    MPI_OK(MPI_Comm_free(&dup));
    free(b1);
    free(b2);
    free(bb);
    free(src);
    free(dst);
    t_done("buffers");
    return 0;
}
