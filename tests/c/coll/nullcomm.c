/* nullcomm.c - every communicator constructor with MPI_UNDEFINED or an empty
 * group on some processes: those get MPI_COMM_NULL, the others a working
 * communicator, and nobody hangs (MPI_Comm_split, MPI_Comm_split_type,
 * MPI_Comm_create, MPI_Comm_create_group, on MPI_COMM_WORLD, on a
 * duplicate, and on an intercommunicator between the even and the odd
 * ranks).  At least 2 ranks. */
#include "coll.h"

/* A communicator that must work: a barrier and an allreduce of its size. */
static void works(MPI_Comm c, int expect_size, const char *what)
{
    int n = -1, s = 0, inter = 0;
    MPI_OK(MPI_Comm_test_inter(c, &inter));
    MPI_OK(inter ? MPI_Comm_remote_size(c, &n) : MPI_Comm_size(c, &n));
    if (!inter)
        CHECKF(n == expect_size, "%s: size %d, expected %d", what, n, expect_size);
    MPI_OK(MPI_Barrier(c));
    if (!inter) {
        int one = 1;
        MPI_OK(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, c));
        CHECKF(s == n, "%s: allreduce %d", what, s);
    }
}

static void intra(MPI_Comm base, const char *name)
{
    int me, n;
    MPI_OK(MPI_Comm_rank(base, &me));
    MPI_OK(MPI_Comm_size(base, &n));
    MPI_Comm c;
    /* Comm_split: rank 1 alone passes MPI_UNDEFINED, then rank 0 alone, then all. */
    for (int u = 0; u < 2; u++) {
        MPI_OK(MPI_Comm_split(base, me == u ? MPI_UNDEFINED : 3, n - me, &c));
        if (me == u) {
            CHECKF(c == MPI_COMM_NULL, "%s: split, MPI_UNDEFINED on rank %d", name, u);
        } else {
            CHECK(c != MPI_COMM_NULL);
            works(c, n - 1, name);
            MPI_OK(MPI_Comm_free(&c));
        }
    }
    MPI_OK(MPI_Comm_split(base, MPI_UNDEFINED, 0, &c));
    CHECK(c == MPI_COMM_NULL);
    /* Comm_split_type: MPI_UNDEFINED on rank 1, shared elsewhere. */
    MPI_OK(MPI_Comm_split_type(base, me == 1 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, 0,
                               MPI_INFO_NULL, &c));
    if (me == 1) {
        CHECK(c == MPI_COMM_NULL);
    } else {
        CHECK(c != MPI_COMM_NULL);
        MPI_OK(MPI_Barrier(c));
        MPI_OK(MPI_Comm_free(&c));
    }
    /* Comm_create: MPI_GROUP_EMPTY everywhere, then a group without rank 1. */
    MPI_Group g, sub;
    MPI_OK(MPI_Comm_group(base, &g));
    MPI_OK(MPI_Comm_create(base, MPI_GROUP_EMPTY, &c));
    CHECK(c == MPI_COMM_NULL);
    int ex = 1;
    MPI_OK(MPI_Group_excl(g, 1, &ex, &sub));
    MPI_OK(MPI_Comm_create(base, sub, &c));
    if (me == 1) {
        CHECK(c == MPI_COMM_NULL);
    } else {
        works(c, n - 1, name);
        MPI_OK(MPI_Comm_free(&c));
    }
    /* Comm_create_group: rank 1 passes MPI_GROUP_EMPTY (a local call for
     * it), the others the group without it. */
    MPI_OK(MPI_Comm_create_group(base, me == 1 ? MPI_GROUP_EMPTY : sub, 5, &c));
    if (me == 1) {
        CHECKF(c == MPI_COMM_NULL, "%s: create_group with MPI_GROUP_EMPTY", name);
    } else {
        works(c, n - 1, name);
        MPI_OK(MPI_Comm_free(&c));
    }
    MPI_OK(MPI_Group_free(&sub));
    MPI_OK(MPI_Group_free(&g));
    MPI_OK(MPI_Barrier(base));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size >= 2);
    intra(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    MPI_Comm d;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    intra(d, "a duplicate");
    MPI_OK(MPI_Comm_free(&d));

    /* Intercommunicator between the even and the odd ranks. */
    MPI_Comm half, ic, c;
    int g = t_rank % 2;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g, t_rank, &half));
    MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - g, 9, &ic));
    /* split: group 1 all MPI_UNDEFINED (nobody gets one), then world rank 1 alone. */
    MPI_OK(MPI_Comm_split(ic, g == 1 ? MPI_UNDEFINED : 0, 0, &c));
    CHECK(c == MPI_COMM_NULL);
    MPI_OK(MPI_Comm_split(ic, t_rank == 1 ? MPI_UNDEFINED : 0, 0, &c));
    if (t_rank == 1 || t_size < 4) {
        /* (under 4 ranks, group 1 has nobody left: MPI_COMM_NULL for all) */
        CHECK(c == MPI_COMM_NULL);
    } else {
        CHECK(c != MPI_COMM_NULL);
        if (is_madmpi()) /* (MPICH 4.2 hangs in a barrier on it) */
            works(c, 0, "intercommunicator split");
        MPI_OK(MPI_Comm_free(&c));
    }
    MPI_OK(MPI_Comm_split_type(ic, MPI_UNDEFINED, 0, MPI_INFO_NULL, &c));
    CHECK(c == MPI_COMM_NULL);
    /* create: group 1 passes MPI_GROUP_EMPTY */
    MPI_Group lg;
    MPI_OK(MPI_Comm_group(ic, &lg));
    MPI_OK(MPI_Comm_create(ic, g == 1 ? MPI_GROUP_EMPTY : lg, &c));
    CHECK(c == MPI_COMM_NULL);
    MPI_OK(MPI_Comm_create(ic, lg, &c));
    works(c, 0, "intercommunicator create");
    MPI_OK(MPI_Comm_free(&c));
    MPI_OK(MPI_Group_free(&lg));
    MPI_OK(MPI_Comm_free(&ic));
    MPI_OK(MPI_Comm_free(&half));
    t_done("nullcomm");
    return 0;
}
