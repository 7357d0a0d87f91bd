/* sessions_world.c - the sessions model and the world model in one process, in either order:
 * argv[1] "world-first" (MPI_Init, then MPI_Session_init; MPI_Finalize before
 * MPI_Session_finalize, the session's communicator still working in between) or
 * "session-first" (MPI_Session_init, then MPI_Init; MPI_Finalize last). Traffic with byte
 * checks on MPI_COMM_WORLD and on a communicator made from mpi://WORLD, interleaved.
 */
#include "../p2p/common.h"

static void exchange(MPI_Comm c, unsigned k)
{
    int r, n;
    MPI_OK(MPI_Comm_rank(c, &r));
    MPI_OK(MPI_Comm_size(c, &n));
    enum { N = 70000 }; /* a rendezvous */
    unsigned char *out = xmalloc(N), *in = xmalloc(N);
    fill(out, N, (unsigned)r, k);
    MPI_OK(MPI_Sendrecv(out, N, MPI_BYTE, (r + 1) % n, 9, in, N, MPI_BYTE, (r + n - 1) % n, 9, c,
                        MPI_STATUS_IGNORE));
    long bad = verify(in, N, (unsigned)((r + n - 1) % n), k);
    CHECKF(bad < 0, "round %u: byte %ld", k, bad);
    free(out);
    free(in);
}

static MPI_Comm from_world(MPI_Session s)
{
    MPI_Group g;
    MPI_Comm c;
    MPI_OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    MPI_OK(MPI_Comm_create_from_group(g, "world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    MPI_OK(MPI_Group_free(&g));
    return c;
}

int main(int argc, char **argv)
{
    int world_first = argc > 1 && strcmp(argv[1], "world-first") == 0;
    MPI_Session s;
    MPI_Comm sc;
    int flag = 0, cmp = -1;
    if (world_first) {
        t_init(&argc, &argv);
        MPI_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    } else {
        MPI_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
        MPI_OK(MPI_Initialized(&flag));
        CHECK(!flag);
        sc = from_world(s);
        exchange(sc, 1);
        MPI_OK(MPI_Comm_free(&sc));
        t_init(&argc, &argv);
    }
    MPI_OK(MPI_Initialized(&flag));
    CHECK(flag);
    sc = from_world(s);
    MPI_OK(MPI_Comm_compare(sc, MPI_COMM_WORLD, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    for (unsigned k = 2; k < 6; k++) {
        exchange(k % 2 ? sc : MPI_COMM_WORLD, k);
        exchange(k % 2 ? MPI_COMM_WORLD : sc, k + 10);
    }
    if (world_first) {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0) {
            printf("OK sessions_world\n");
            fflush(stdout);
        }
        MPI_OK(MPI_Finalize());
        MPI_OK(MPI_Finalized(&flag));
        CHECK(flag);
        exchange(sc, 20); /* the session outlives the world model */
        MPI_OK(MPI_Comm_free(&sc));
        MPI_OK(MPI_Session_finalize(&s));
    } else {
        MPI_OK(MPI_Comm_free(&sc));
        MPI_OK(MPI_Session_finalize(&s));
        exchange(MPI_COMM_WORLD, 21); /* the world model outlives the session */
        t_done("sessions_world");
    }
    return 0;
}
