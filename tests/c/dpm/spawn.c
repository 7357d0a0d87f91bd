/* spawn.c - MPI_Comm_spawn and MPI_Comm_spawn_multiple under our mpirun:
 * the parents (any number of ranks) start copies of this program, which find
 * their parents with MPI_Comm_get_parent; both sides check sizes and
 * arguments, exchange messages, run an intercommunicator broadcast and
 * allreduce, merge, and disconnect (after which MPI_Comm_get_parent gives
 * MPI_COMM_NULL). spawn_multiple starts two commands with their own arguments,
 * one of them in another working directory (info key "wdir"). A program that
 * does not exist fails with MPI_ERR_SPAWN, every error code MPI_ERR_SPAWN.
 */
#define _POSIX_C_SOURCE 200809L
#include "../p2p/common.h"

#include <unistd.h>

static int child(int argc, char **argv, MPI_Comm parent)
{
    /* argv: prog child <tag> <expected world size> [<expected cwd>] */
    CHECKF(argc >= 4, "child argc %d", argc);
    int want = atoi(argv[3]);
    int world, rsize, rank;
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECKF(world == want, "child world %d, expected %d", world, want);
    if (argc >= 5) {
        char cwd[4096];
        CHECK(getcwd(cwd, sizeof cwd) != NULL);
        CHECKF(strcmp(cwd, argv[4]) == 0, "child cwd %s, expected %s", cwd, argv[4]);
    }
    MPI_OK(MPI_Comm_remote_size(parent, &rsize));
    int tag = atoi(argv[2]), got = -1;
    /* The parents' root sends every child its rank + tag; each answers. */
    MPI_OK(MPI_Recv(&got, 1, MPI_INT, 0, 1, parent, MPI_STATUS_IGNORE));
    CHECKF(got == rank + tag, "child %d got %d", rank, got);
    got = -got;
    MPI_OK(MPI_Send(&got, 1, MPI_INT, 0, 2, parent));
    int b = 0;
    MPI_OK(MPI_Bcast(&b, 1, MPI_INT, 0, parent));
    CHECK(b == 77);
    int one = 1, sum = 0;
    MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, parent));
    CHECK(sum == 10 * rsize);
    MPI_Comm merged;
    int mr;
    MPI_OK(MPI_Intercomm_merge(parent, 1, &merged));
    MPI_OK(MPI_Comm_rank(merged, &mr));
    CHECKF(mr == rsize + rank, "child merged rank %d", mr);
    MPI_OK(MPI_Barrier(merged));
    MPI_OK(MPI_Comm_free(&merged));
    MPI_OK(MPI_Comm_disconnect(&parent));
    MPI_Comm again;
    MPI_OK(MPI_Comm_get_parent(&again));
    CHECK(again == MPI_COMM_NULL);
    MPI_Finalize();
    return 0;
}

/* The parents' side of one spawn: n children, each expecting tag. */
static void talk(MPI_Comm inter, int n, int tag)
{
    int rsize;
    MPI_OK(MPI_Comm_remote_size(inter, &rsize));
    CHECKF(rsize == n, "spawned %d, expected %d", rsize, n);
    if (t_rank == 0) {
        for (int i = 0; i < n; i++) {
            int v = i + tag, got;
            MPI_OK(MPI_Send(&v, 1, MPI_INT, i, 1, inter));
            MPI_OK(MPI_Recv(&got, 1, MPI_INT, i, 2, inter, MPI_STATUS_IGNORE));
            CHECKF(got == -(i + tag), "child %d answered %d", i, got);
        }
    }
    int b = 77;
    MPI_OK(MPI_Bcast(&b, 1, MPI_INT, t_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    int ten = 10, sum = 0;
    MPI_OK(MPI_Allreduce(&ten, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECK(sum == n);
    MPI_Comm merged;
    int mr;
    MPI_OK(MPI_Intercomm_merge(inter, 0, &merged));
    MPI_OK(MPI_Comm_rank(merged, &mr));
    CHECK(mr == t_rank);
    MPI_OK(MPI_Barrier(merged));
    MPI_OK(MPI_Comm_free(&merged));
    MPI_OK(MPI_Comm_disconnect(&inter));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_OK(MPI_Comm_get_parent(&parent));
    if (parent != MPI_COMM_NULL)
        return child(argc, argv, parent);
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    /* MPI_Comm_spawn: 2 children; the arguments matter at the root only. */
    char *args[] = {"child", "100", "2", NULL};
    int codes[4] = {-1, -1, -1, -1};
    MPI_Comm inter;
    MPI_OK(MPI_Comm_spawn(t_rank == 0 ? argv[0] : NULL, t_rank == 0 ? args : MPI_ARGV_NULL,
                          t_rank == 0 ? 2 : -5, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                          codes));
    CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS);
    talk(inter, 2, 100);

    /* MPI_Comm_spawn_multiple: 1 + 2 children, the second command in /tmp. */
    char *cmds[2] = {argv[0], argv[0]};
    char *a0[] = {"child", "200", "3", NULL};
    char *a1[] = {"child", "199", "3", "/tmp", NULL};
    char **av[2] = {a0, a1};
    int np[2] = {1, 2};
    MPI_Info infos[2];
    infos[0] = MPI_INFO_NULL;
    MPI_OK(MPI_Info_create(&infos[1]));
    MPI_OK(MPI_Info_set(infos[1], "wdir", "/tmp"));
    int root = t_size - 1;
    MPI_OK(MPI_Comm_spawn_multiple(2, cmds, av, np, infos, root, MPI_COMM_WORLD, &inter,
                                   MPI_ERRCODES_IGNORE));
    MPI_OK(MPI_Info_free(&infos[1]));
    /* talk() has rank 0 send: children 1 and 2 were started by the second command (tag
     * 199), child 0 by the first (tag 200): child i expects i + tag, so 200 + 0 and
     * 199 + 1, 199 + 2 are not all i + 200: send what each expects. */
    int rsize;
    MPI_OK(MPI_Comm_remote_size(inter, &rsize));
    CHECK(rsize == 3);
    if (t_rank == 0) {
        for (int i = 0; i < 3; i++) {
            int v = i + (i == 0 ? 200 : 199), got;
            MPI_OK(MPI_Send(&v, 1, MPI_INT, i, 1, inter));
            MPI_OK(MPI_Recv(&got, 1, MPI_INT, i, 2, inter, MPI_STATUS_IGNORE));
            CHECK(got == -v);
        }
    }
    int b = 77;
    MPI_OK(MPI_Bcast(&b, 1, MPI_INT, t_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    int ten = 10, sum = 0;
    MPI_OK(MPI_Allreduce(&ten, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECK(sum == 3);
    MPI_Comm merged;
    MPI_OK(MPI_Intercomm_merge(inter, 0, &merged));
    MPI_OK(MPI_Barrier(merged));
    MPI_OK(MPI_Comm_free(&merged));
    MPI_OK(MPI_Comm_disconnect(&inter));

    /* A program that does not exist. */
    for (int i = 0; i < 4; i++)
        codes[i] = -1;
    inter = MPI_COMM_WORLD;
    EXPECT_CLASS(MPI_Comm_spawn("/nonexistent/program", MPI_ARGV_NULL, 3, MPI_INFO_NULL, 0,
                                MPI_COMM_WORLD, &inter, codes),
                 MPI_ERR_SPAWN);
    CHECK(inter == MPI_COMM_NULL);
    if (t_rank == 0)
        CHECK(codes[0] == MPI_ERR_SPAWN && codes[1] == MPI_ERR_SPAWN && codes[2] == MPI_ERR_SPAWN);
    t_done("spawn");
    return 0;
}
