/* split.c - large messages over shared memory, which madmpi copies with
 * both processes at once (a "split copy": the receiver reads chunks while
 * the sender writes others).  Every way a large transfer can meet its
 * receive: blocking, non-blocking with several in flight, both directions
 * at once (each rank receiving and helping), unaligned buffers, sizes that
 * do not divide into chunks, truncation, a synchronous send, and a sender
 * that computes outside MPI while its message is received.  The data is
 * checked byte for byte.  Exactly 2 ranks. */
#include "common.h"

#define MAXN ((4u << 20) + 64u)
#define INFLIGHT 3

static const size_t sizes[] = {128u << 10, (128u << 10) + 1, (1u << 20) - 3,
                               2u << 20, (4u << 20) + 7};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Rank 0 sends `n` bytes at `sbuf` in `rounds` rounds with tag base `tag`;
 * rank 1 receives each into `rbuf` and checks it. */
static void one_way(unsigned char *sbuf, unsigned char *rbuf, size_t n, int rounds, int tag)
{
    for (int r = 0; r < rounds; r++) {
        if (t_rank == 0) {
            fill(sbuf, n, (unsigned)n, (unsigned)r);
            MPI_OK(MPI_Send(sbuf, (int)n, MPI_BYTE, 1, tag + r, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            int cnt = -1;
            memset(rbuf, 0, n);
            MPI_OK(MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, tag + r, MPI_COMM_WORLD, &st));
            MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
            CHECKF((size_t)cnt == n, "count %d for %zu bytes", cnt, n);
            long bad = verify(rbuf, n, (unsigned)n, (unsigned)r);
            CHECKF(bad < 0, "%zu bytes, round %d: byte %ld wrong", n, r, bad);
        }
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int peer = 1 - t_rank;
    unsigned char *a = xmalloc(MAXN), *b = xmalloc(MAXN);

    /* 1. Blocking, aligned and then unaligned on both sides. */
    for (size_t k = 0; k < NSIZES; k++) {
        one_way(a, b, sizes[k], 8, 100);
        one_way(a + 3, b + 5, sizes[k], 2, 200);
    }

    /* 2. Both directions at once: each rank owns one copy and helps the other. */
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        for (int r = 0; r < 4; r++) {
            fill(a, n, (unsigned)t_rank, (unsigned)r);
            memset(b, 0, n);
            MPI_OK(MPI_Sendrecv(a, (int)n, MPI_BYTE, peer, 300 + r, b, (int)n, MPI_BYTE, peer,
                                300 + r, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            long bad = verify(b, n, (unsigned)peer, (unsigned)r);
            CHECKF(bad < 0, "sendrecv %zu bytes: byte %ld wrong", n, bad);
        }
    }

    /* 3. Several in flight: INFLIGHT sends of different sizes, received in order. */
    {
        size_t n = 1u << 20;
        unsigned char *big = xmalloc(n * INFLIGHT);
        MPI_Request reqs[INFLIGHT];
        for (int r = 0; r < 3; r++) {
            for (int i = 0; i < INFLIGHT; i++) {
                size_t len = n - (size_t)i * 4099;
                if (t_rank == 0) {
                    fill(big + (size_t)i * n, len, (unsigned)i, (unsigned)r);
                    MPI_OK(MPI_Isend(big + (size_t)i * n, (int)len, MPI_BYTE, 1, 400 + i,
                                     MPI_COMM_WORLD, &reqs[i]));
                } else {
                    memset(big + (size_t)i * n, 0, len);
                    MPI_OK(MPI_Irecv(big + (size_t)i * n, (int)len, MPI_BYTE, 0, 400 + i,
                                     MPI_COMM_WORLD, &reqs[i]));
                }
            }
            MPI_OK(MPI_Waitall(INFLIGHT, reqs, MPI_STATUSES_IGNORE));
            if (t_rank == 1)
                for (int i = 0; i < INFLIGHT; i++) {
                    long bad = verify(big + (size_t)i * n, n - (size_t)i * 4099, (unsigned)i,
                                      (unsigned)r);
                    CHECKF(bad < 0, "in flight %d: byte %ld wrong", i, bad);
                }
        }
        free(big);
    }

    /* 4. Truncation: a third fits; it is delivered, nothing past it is written. */
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k], fit = sizes[k] / 3;
        if (t_rank == 0) {
            fill(a, n, 7, (unsigned)k);
            MPI_OK(MPI_Send(a, (int)n, MPI_BYTE, 1, 500, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            memset(b, 0, n);
            int rc = MPI_Recv(b, (int)fit, MPI_BYTE, 0, 500, MPI_COMM_WORLD, &st);
            CHECKF(err_class(rc) == MPI_ERR_TRUNCATE, "truncated %zu: rc %d", n, rc);
            long bad = verify(b, fit, 7, (unsigned)k);
            CHECKF(bad < 0, "truncated %zu: byte %ld wrong", n, bad);
            for (size_t i = fit; i < n; i++)
                CHECKF(b[i] == 0, "truncated %zu: byte %zu past the buffer written", n, i);
        }
    }

    /* 5. Synchronous mode. */
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        if (t_rank == 0) {
            fill(a, n, 9, (unsigned)k);
            MPI_OK(MPI_Ssend(a, (int)n, MPI_BYTE, 1, 600, MPI_COMM_WORLD));
        } else {
            memset(b, 0, n);
            MPI_OK(MPI_Recv(b, (int)n, MPI_BYTE, 0, 600, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            long bad = verify(b, n, 9, (unsigned)k);
            CHECKF(bad < 0, "ssend %zu: byte %ld wrong", n, bad);
        }
    }

    /* 6. The sender computes outside MPI while the receiver takes the whole
     * message alone; it then finds its send complete. */
    {
        size_t n = 2u << 20;
        if (t_rank == 0) {
            MPI_Request r;
            fill(a, n, 11, 0);
            MPI_OK(MPI_Isend(a, (int)n, MPI_BYTE, 1, 700, MPI_COMM_WORLD, &r));
            volatile double x = 0;
            for (long i = 0; i < 20000000L; i++)
                x += (double)i * 1e-9;
            MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            memset(b, 0, n);
            MPI_OK(MPI_Recv(b, (int)n, MPI_BYTE, 0, 700, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            long bad = verify(b, n, 11, 0);
            CHECKF(bad < 0, "busy sender: byte %ld wrong", bad);
        }
    }

    free(a);
    free(b);
    t_done("split");
}
