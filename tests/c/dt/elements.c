/* elements.c - MPI_Get_count and MPI_Get_elements(_x, _c) after receives
 * that fill derived types only partly: k records of a struct and then the
 * first two fields of one more (Get_count is MPI_UNDEFINED, Get_elements
 * counts the basic elements received, the rest of the last record is not
 * written), and 5 ints received into two vectors of 4.  Small and large,
 * with the other rank and with itself.
 *
 * 1 or 2 ranks. */
#include "../p2p/common.h"
#include <stddef.h>

struct rec {
    int a;
    double b[2];
    char c;
};

static MPI_Datatype rec_type(void)
{
    int bl[3] = {1, 2, 1};
    MPI_Aint dp[3] = {offsetof(struct rec, a), offsetof(struct rec, b), offsetof(struct rec, c)};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Datatype t;
    MPI_OK(MPI_Type_create_struct(3, bl, dp, ty, &t));
    MPI_OK(MPI_Type_commit(&t));
    return t;
}

static void partial_struct(long k, int peer)
{
    MPI_Datatype rec = rec_type(), part;
    /* k records, then an int and a double placed as in one more record */
    int bl[3] = {(int)k, 1, 1};
    MPI_Aint dp[3] = {0, (MPI_Aint)(k * sizeof(struct rec) + offsetof(struct rec, a)),
                      (MPI_Aint)(k * sizeof(struct rec) + offsetof(struct rec, b))};
    MPI_Datatype ty[3] = {rec, MPI_INT, MPI_DOUBLE};
    MPI_OK(MPI_Type_create_struct(3, bl, dp, ty, &part));
    MPI_OK(MPI_Type_commit(&part));

    struct rec *s = (struct rec *)xmalloc((size_t)(k + 1) * sizeof(struct rec));
    struct rec *r = (struct rec *)xmalloc((size_t)(k + 2) * sizeof(struct rec));
    for (long i = 0; i <= k; i++) {
        s[i].a = (int)(i + 1000 * t_rank);
        s[i].b[0] = (double)i + 0.25;
        s[i].b[1] = (double)i + 0.75;
        s[i].c = (char)('a' + i % 26);
    }
    memset(r, 0, (size_t)(k + 2) * sizeof(struct rec));
    MPI_Request q;
    MPI_Status st;
    MPI_OK(MPI_Irecv(r, (int)(k + 2), rec, peer, 3, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(s, 1, part, peer, 3, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q, &st));

    int count = 0, elems = 0;
    MPI_Count ex = 0, ec = 0;
    MPI_OK(MPI_Get_count(&st, rec, &count));
    CHECKF(count == MPI_UNDEFINED, "Get_count %d, expected MPI_UNDEFINED", count);
    MPI_OK(MPI_Get_elements(&st, rec, &elems));
    CHECKF(elems == (int)(4 * k + 2), "Get_elements %d, expected %ld", elems, 4 * k + 2);
    MPI_OK(MPI_Get_elements_x(&st, rec, &ex));
    CHECK(ex == 4 * k + 2);
    MPI_OK(MPI_Get_elements_c(&st, rec, &ec));
    CHECK(ec == 4 * k + 2);
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &count));
    CHECK(count == (int)(k * 21 + 12));

    int from = peer;
    for (long i = 0; i < k; i++)
        CHECKF(r[i].a == (int)(i + 1000 * from) && r[i].b[1] == (double)i + 0.75 &&
                   r[i].c == (char)('a' + i % 26),
               "record %ld differs", i);
    CHECK(r[k].a == (int)(k + 1000 * from) && r[k].b[0] == (double)k + 0.25);
    CHECK(r[k].b[1] == 0.0 && r[k].c == 0 && r[k + 1].a == 0);
    free(s);
    free(r);
    MPI_OK(MPI_Type_free(&part));
    MPI_OK(MPI_Type_free(&rec));
}

static void partial_vector(int peer)
{
    MPI_Datatype v;
    MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &v));
    MPI_OK(MPI_Type_commit(&v));
    int s[5] = {1, 2, 3, 4, 5}, r[16];
    memset(r, 0, sizeof r);
    MPI_Status st;
    MPI_OK(MPI_Sendrecv(s, 5, MPI_INT, peer, 4, r, 2, v, peer, 4, MPI_COMM_WORLD, &st));
    int count = 0, elems = 0;
    MPI_OK(MPI_Get_count(&st, v, &count));
    CHECK(count == MPI_UNDEFINED);
    MPI_OK(MPI_Get_elements(&st, v, &elems));
    CHECK(elems == 5);
    /* the second vector starts one extent (7 ints) after the first */
    CHECK(r[0] == 1 && r[2] == 2 && r[4] == 3 && r[6] == 4 && r[7] == 5 && r[9] == 0 && r[1] == 0);
    MPI_OK(MPI_Type_free(&v));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size <= 2);
    int other = (t_rank + 1) % t_size;
    for (int self = 0; self < 2; self++) {
        int peer = self ? t_rank : other;
        partial_struct(3, peer);
        partial_struct(50000, peer);
        partial_vector(peer);
    }
    t_done("elements");
    return 0;
}
