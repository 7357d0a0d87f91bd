/* session_buffers.c - a session's buffer for buffered sends (MPI-4.1 §3.6), in a program that
 * never calls MPI_Init: MPI_Session_attach_buffer/detach_buffer (+ _c), user memory and
 * MPI_BUFFER_AUTOMATIC, MPI_Session_flush_buffer/iflush_buffer. A buffered send on a
 * communicator derived from the session (made from its group, or from such a communicator)
 * uses the communicator's buffer, else the session's, else the process's; the process has no
 * buffer here, so a send that finds no buffer fails with MPI_ERR_BUFFER. Ring traffic with byte
 * checks on any number of ranks.
 */
#include "../p2p/common.h"

#define MSG 10000

/* Every rank sends `n` buffered messages of MSG bytes to next on `c` and receives as many from
 * prev (posted first). flush: 1 MPI_Session_flush_buffer, 2 MPI_Session_iflush_buffer. */
static void ring(MPI_Session s, MPI_Comm c, int n, unsigned tag, int flush)
{
    struct bsend_ring r = bsend_ring_begin(c, n, MSG, tag);
    if (flush == 1)
        MPI_OK(MPI_Session_flush_buffer(s));
    else if (flush == 2) {
        MPI_Request f;
        MPI_OK(MPI_Session_iflush_buffer(s, &f));
        MPI_OK(MPI_Wait(&f, MPI_STATUS_IGNORE));
        CHECK(f == MPI_REQUEST_NULL);
    }
    bsend_ring_end(&r);
}

/* A buffered send of MSG bytes to next on `c` must fail with MPI_ERR_BUFFER (no buffer, or one
 * too small). */
static void no_room(MPI_Comm c)
{
    int size, rank;
    MPI_OK(MPI_Comm_size(c, &size));
    MPI_OK(MPI_Comm_rank(c, &rank));
    char *out = xmalloc(MSG);
    EXPECT_CLASS(MPI_Bsend(out, MSG, MPI_CHAR, (rank + 1) % size, 77, c), MPI_ERR_BUFFER);
    free(out);
}

static MPI_Comm world_comm(MPI_Session s, const char *tag)
{
    MPI_Group g;
    MPI_Comm c;
    MPI_OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    MPI_OK(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    MPI_OK(MPI_Group_free(&g));
    return c;
}

int main(void)
{
    MPI_Session s, s2;
    MPI_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    MPI_Comm wc = world_comm(s, "org.madmpi.test.sbuf");
    MPI_OK(MPI_Comm_rank(wc, &t_rank));
    MPI_OK(MPI_Comm_size(wc, &t_size));
    void *addr;
    int size;
    MPI_Count csize;

    /* No buffer anywhere: a buffered send fails. */
    no_room(wc);

    /* The session's user buffer serves the session's communicator; detach gives it back. */
    int bsize = 4 * (MSG + MPI_BSEND_OVERHEAD);
    char *b1 = xmalloc((size_t)bsize), *b2 = xmalloc((size_t)bsize * 2);
    MPI_OK(MPI_Session_attach_buffer(s, b1, bsize));
    EXPECT_CLASS(MPI_Session_attach_buffer(s, b2, bsize), MPI_ERR_BUFFER);
    /* The buffer holds exactly 4 messages: each ring but the last flushes it (a message
     * received may not have left its sender's buffer yet), the detach waits for the last. */
    ring(s, wc, 4, 1, 1);
    ring(s, wc, 4, 2, 2);
    ring(s, wc, 4, 3, 0);
    MPI_OK(MPI_Session_detach_buffer(s, &addr, &size));
    CHECK(addr == b1 && size == bsize);
    no_room(wc);

    /* Attach again (another buffer, the _c forms), and a communicator derived from the
     * session's communicator (a dup, a split, the group of it made into another one) uses it
     * too. */
    MPI_OK(MPI_Session_attach_buffer_c(s, b2, 2 * bsize));
    MPI_Comm dup, split, again;
    MPI_OK(MPI_Comm_dup(wc, &dup));
    MPI_OK(MPI_Comm_split(wc, 0, t_size - t_rank, &split));
    MPI_Group wg;
    MPI_OK(MPI_Comm_group(wc, &wg));
    MPI_OK(MPI_Comm_create_from_group(wg, "org.madmpi.test.sbuf.again", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &again));
    MPI_OK(MPI_Group_free(&wg));
    ring(s, dup, 8, 4, 1);
    ring(s, split, 8, 5, 2);
    ring(s, again, 8, 6, 0);
    MPI_OK(MPI_Session_detach_buffer_c(s, &addr, &csize));
    CHECK(addr == b2 && csize == 2 * bsize);
    no_room(dup);
    no_room(split);
    no_room(again);

    /* Automatic. */
    MPI_OK(MPI_Session_attach_buffer(s, MPI_BUFFER_AUTOMATIC, 0));
    EXPECT_CLASS(MPI_Session_attach_buffer(s, MPI_BUFFER_AUTOMATIC, 0), MPI_ERR_BUFFER);
    ring(s, wc, 40, 7, 2);
    ring(s, dup, 40, 8, 1);
    MPI_OK(MPI_Session_detach_buffer(s, &addr, &size));
    CHECK(addr == MPI_BUFFER_AUTOMATIC && size == 0);
    MPI_OK(MPI_Session_attach_buffer_c(s, MPI_BUFFER_AUTOMATIC, 0));
    MPI_OK(MPI_Session_detach_buffer_c(s, &addr, &csize));
    CHECK(addr == MPI_BUFFER_AUTOMATIC && csize == 0);
    /* Nothing attached: (NULL, 0) in madmpi, as MPICH; flushing waits for nothing. */
    if (is_madmpi()) {
        MPI_OK(MPI_Session_detach_buffer(s, &addr, &size));
        CHECK(addr == NULL && size == 0);
    }
    MPI_OK(MPI_Session_flush_buffer(s));

    /* A communicator's buffer comes first: the session's is too small for MSG bytes, dup's
     * is not; wc (no buffer of its own) uses the session's. */
    MPI_OK(MPI_Session_attach_buffer(s, b1, MSG / 2));
    MPI_OK(MPI_Comm_attach_buffer(dup, b2, 2 * bsize));
    ring(s, dup, 8, 9, 0);
    no_room(wc);
    {
        /* A small message fits the session's buffer. */
        char small[16] = {0};
        MPI_Request rr;
        int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
        MPI_OK(MPI_Irecv(small + 8, 8, MPI_CHAR, prev, 10, wc, &rr));
        MPI_OK(MPI_Bsend(small, 8, MPI_CHAR, next, 10, wc));
        MPI_OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    }
    MPI_OK(MPI_Comm_detach_buffer(dup, &addr, &size));
    CHECK(addr == b2 && size == 2 * bsize);
    no_room(dup); /* now the session's, too small */
    MPI_OK(MPI_Session_detach_buffer(s, &addr, &size));
    CHECK(addr == b1 && size == MSG / 2);

    /* Another session's buffer does not serve this session's communicators, and this
     * session's does not serve the other's. */
    MPI_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2));
    MPI_Comm wc2 = world_comm(s2, "org.madmpi.test.sbuf.two");
    MPI_OK(MPI_Session_attach_buffer(s2, MPI_BUFFER_AUTOMATIC, 0));
    no_room(wc);
    ring(s2, wc2, 8, 11, 1);
    MPI_OK(MPI_Session_detach_buffer(s2, &addr, &size));
    MPI_OK(MPI_Session_attach_buffer(s, MPI_BUFFER_AUTOMATIC, 0));
    no_room(wc2);
    MPI_OK(MPI_Session_detach_buffer(s, &addr, &size));

    /* Detach waits for the messages in flight: a large one, received after the detach. */
    int big = 1 << 20;
    char *bb = xmalloc((size_t)big + MPI_BSEND_OVERHEAD), *src = xmalloc((size_t)big),
         *dst = xmalloc((size_t)big);
    MPI_Request rr;
    fill(src, (size_t)big, (unsigned)t_rank, 40);
    MPI_OK(MPI_Irecv(dst, big, MPI_CHAR, (t_rank + t_size - 1) % t_size, 40, wc, &rr));
    MPI_OK(MPI_Session_attach_buffer(s, bb, big + MPI_BSEND_OVERHEAD));
    MPI_OK(MPI_Bsend(src, big, MPI_CHAR, (t_rank + 1) % t_size, 40, wc));
    MPI_OK(MPI_Session_detach_buffer(s, &addr, &size));
    CHECK(addr == bb && size == big + MPI_BSEND_OVERHEAD);
    MPI_OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    CHECK(verify(dst, (size_t)big, (unsigned)((t_rank + t_size - 1) % t_size), 40) < 0);

    /* Errors, on the session's handler (MPI_ERRORS_RETURN). */
    EXPECT_CLASS(MPI_Session_attach_buffer(MPI_SESSION_NULL, b1, 10), MPI_ERR_SESSION);
    EXPECT_CLASS(MPI_Session_detach_buffer(MPI_SESSION_NULL, &addr, &size), MPI_ERR_SESSION);
    EXPECT_CLASS(MPI_Session_flush_buffer(MPI_SESSION_NULL), MPI_ERR_SESSION);
    EXPECT_CLASS(MPI_Session_attach_buffer(s, b1, -1), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Session_attach_buffer(s, NULL, 10), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Session_detach_buffer(s, NULL, &size), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Session_iflush_buffer(s, NULL), MPI_ERR_ARG);

    /* A buffer still attached at MPI_Session_finalize is detached by it. */
    MPI_OK(MPI_Session_attach_buffer(s2, b1, bsize));
    ring(s2, wc2, 2, 12, 0);
    MPI_OK(MPI_Comm_free(&wc2));
    MPI_OK(MPI_Session_finalize(&s2));

    MPI_OK(MPI_Barrier(wc));
    if (t_rank == 0) {
        printf("OK session_buffers\n");
        fflush(stdout);
    }
    MPI_OK(MPI_Comm_free(&dup));
    MPI_OK(MPI_Comm_free(&split));
    MPI_OK(MPI_Comm_free(&again));
    MPI_OK(MPI_Comm_free(&wc));
    MPI_OK(MPI_Session_finalize(&s));
    free(b1);
    free(b2);
    free(bb);
    free(src);
    free(dst);
    return 0;
}
