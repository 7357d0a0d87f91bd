/* sendrecv.c - MPI_Sendrecv and MPI_Sendrecv_replace around a ring, sizes
 * from 0 to 4 MiB (rendezvous), MPI_INT and MPI_DOUBLE counts, ANY_SOURCE /
 * ANY_TAG on the receive side, MPI_PROC_NULL partners, the _c variants.
 * 1..4 ranks. */
#include "common.h"

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    static const int sizes[] = {0, 1, 10, 1000, 16384, 100000, 1 << 20};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    int *a = xmalloc((1 << 20) * sizeof(int)), *b = xmalloc((1 << 20) * sizeof(int));
    MPI_Status st;
    int cnt;

    for (int k = 0; k < nsizes; k++) {
        int n = sizes[k];
        for (int i = 0; i < n; i++)
            a[i] = t_rank * 1000000 + i + k;
        for (int i = 0; i < n; i++)
            b[i] = -1;
        MPI_OK(MPI_Sendrecv(a, n, MPI_INT, right, k, b, n, MPI_INT, left, k, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == k);
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == n);
        for (int i = 0; i < n; i++)
            CHECKF(b[i] == left * 1000000 + i + k, "sendrecv size %d element %d", n, i);

        /* wildcards on the receive side, into a larger buffer */
        MPI_OK(MPI_Sendrecv(a, n, MPI_INT, right, 100 + k, b, 1 << 20, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                            MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 100 + k);
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == n);

        /* replace, as ints */
        for (int i = 0; i < n; i++)
            a[i] = t_rank * 1000000 + 3 * i + k;
        MPI_OK(MPI_Sendrecv_replace(a, n, MPI_INT, right, 200 + k, left, 200 + k, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == left);
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == n);
        for (int i = 0; i < n; i++)
            CHECKF(a[i] == left * 1000000 + 3 * i + k, "sendrecv_replace size %d element %d", n, i);

        /* replace, as doubles (4 MiB at the largest), large-count variant */
        double *d = (double *)b;
        int nd = n / 2;
        for (int i = 0; i < nd; i++)
            d[i] = t_rank + i * 0.5;
        MPI_OK(MPI_Sendrecv_replace_c(d, (MPI_Count)nd, MPI_DOUBLE, right, 300 + k, MPI_ANY_SOURCE, 300 + k,
                                      MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == left);
        for (int i = 0; i < nd; i++)
            CHECK(d[i] == left + i * 0.5);

        MPI_OK(MPI_Sendrecv_c(a, (MPI_Count)n, MPI_INT, right, 400 + k, b, (MPI_Count)n, MPI_INT, left, 400 + k,
                              MPI_COMM_WORLD, &st));
        MPI_Count cc = -1;
        MPI_OK(MPI_Get_count_c(&st, MPI_INT, &cc));
        CHECK(cc == n);
    }

    /* A bigger replace: 4 MiB of bytes. */
    {
        unsigned char *c = (unsigned char *)a;
        fill(c, 4 << 20, 9, (unsigned)t_rank);
        MPI_OK(MPI_Sendrecv_replace(c, 4 << 20, MPI_BYTE, right, 500, left, 500, MPI_COMM_WORLD, &st));
        CHECK(verify(c, 4 << 20, 9, (unsigned)left) < 0);
    }

    /* PROC_NULL partners: the send half goes nowhere, the receive half
     * answers the PROC_NULL status and leaves the buffer alone. */
    {
        int v = 7, w = 8;
        MPI_OK(MPI_Sendrecv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, &w, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                            &st));
        CHECK(w == 8 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
        MPI_OK(MPI_Sendrecv_replace(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
        CHECK(v == 7 && st.MPI_SOURCE == MPI_PROC_NULL);
        /* a shift: first rank receives from nobody, last sends to nobody */
        int to = t_rank + 1 < t_size ? t_rank + 1 : MPI_PROC_NULL;
        int from = t_rank > 0 ? t_rank - 1 : MPI_PROC_NULL;
        v = t_rank;
        MPI_OK(MPI_Sendrecv_replace(&v, 1, MPI_INT, to, 1, from, 1, MPI_COMM_WORLD, &st));
        CHECK(v == (t_rank > 0 ? t_rank - 1 : 0));
    }

    free(a);
    free(b);
    t_done("sendrecv");
    return 0;
}
