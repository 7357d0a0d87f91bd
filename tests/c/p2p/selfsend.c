/* selfsend.c - messages to oneself: small and large (rendezvous) with
 * Isend/Irecv in both orders, blocking Send with the receive posted first,
 * Sendrecv and Sendrecv_replace to self, and MPI_COMM_SELF.  Any number of
 * ranks (each works alone). */
#include "common.h"

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    static const size_t sizes[] = {0, 8, 1000, 65536, 1 << 20, 4 << 20};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    unsigned char *a = xmalloc(4 << 20), *b = xmalloc(4 << 20);
    MPI_Request rs, rr;
    MPI_Status st;
    int cnt;

    for (size_t k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        int c = (int)n;
        /* Isend then Irecv */
        fill(a, n, 1, (unsigned)k);
        memset(b, 0, n);
        MPI_OK(MPI_Isend(a, c, MPI_BYTE, t_rank, 3, MPI_COMM_WORLD, &rs));
        MPI_OK(MPI_Irecv(b, c, MPI_BYTE, t_rank, 3, MPI_COMM_WORLD, &rr));
        MPI_OK(MPI_Wait(&rr, &st));
        MPI_OK(MPI_Wait(&rs, MPI_STATUS_IGNORE));
        CHECK(st.MPI_SOURCE == t_rank && st.MPI_TAG == 3);
        MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
        CHECK((size_t)cnt == n);
        CHECKF(verify(b, n, 1, (unsigned)k) < 0, "isend/irecv self size %zu", n);

        /* Irecv then Isend, waited in the other order */
        fill(a, n, 2, (unsigned)k);
        memset(b, 0, n);
        MPI_OK(MPI_Irecv(b, c, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rr));
        MPI_OK(MPI_Isend(a, c, MPI_BYTE, t_rank, 4, MPI_COMM_WORLD, &rs));
        MPI_OK(MPI_Wait(&rs, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&rr, &st));
        CHECK(st.MPI_SOURCE == t_rank && st.MPI_TAG == 4);
        CHECKF(verify(b, n, 2, (unsigned)k) < 0, "irecv/isend self size %zu", n);

        /* blocking send with the receive posted first */
        fill(a, n, 3, (unsigned)k);
        MPI_OK(MPI_Irecv(b, c, MPI_BYTE, t_rank, 5, MPI_COMM_WORLD, &rr));
        MPI_OK(MPI_Send(a, c, MPI_BYTE, t_rank, 5, MPI_COMM_WORLD));
        MPI_OK(MPI_Wait(&rr, &st));
        CHECKF(verify(b, n, 3, (unsigned)k) < 0, "send self size %zu", n);

        /* Sendrecv to self */
        fill(a, n, 4, (unsigned)k);
        memset(b, 0, n);
        MPI_OK(MPI_Sendrecv(a, c, MPI_BYTE, t_rank, 6, b, c, MPI_BYTE, t_rank, 6, MPI_COMM_WORLD, &st));
        MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
        CHECK((size_t)cnt == n && st.MPI_SOURCE == t_rank);
        CHECKF(verify(b, n, 4, (unsigned)k) < 0, "sendrecv self size %zu", n);

        /* Sendrecv_replace to self */
        fill(a, n, 5, (unsigned)k);
        MPI_OK(MPI_Sendrecv_replace(a, c, MPI_BYTE, t_rank, 7, t_rank, 7, MPI_COMM_WORLD, &st));
        CHECKF(verify(a, n, 5, (unsigned)k) < 0, "sendrecv_replace self size %zu", n);

        /* MPI_COMM_SELF */
        fill(a, n, 6, (unsigned)k);
        memset(b, 0, n);
        MPI_OK(MPI_Isend(a, c, MPI_BYTE, 0, 8, MPI_COMM_SELF, &rs));
        MPI_OK(MPI_Recv(b, c, MPI_BYTE, 0, 8, MPI_COMM_SELF, &st));
        MPI_OK(MPI_Wait(&rs, MPI_STATUS_IGNORE));
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 8);
        CHECKF(verify(b, n, 6, (unsigned)k) < 0, "comm_self size %zu", n);
    }

    /* Many small messages to self, received in order. */
    {
        enum { N = 200 };
        int vals[N];
        MPI_Request reqs[N];
        for (int i = 0; i < N; i++) {
            vals[i] = i * 3;
            MPI_OK(MPI_Isend(&vals[i], 1, MPI_INT, t_rank, 9, MPI_COMM_WORLD, &reqs[i]));
        }
        for (int i = 0; i < N; i++) {
            int v = -1;
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, t_rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECKF(v == i * 3, "self message %d: %d", i, v);
        }
        MPI_OK(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
    }

    free(a);
    free(b);
    t_done("selfsend");
    return 0;
}
