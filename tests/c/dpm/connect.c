/* connect.c - MPI_Open_port, MPI_Comm_accept, MPI_Comm_connect and
 * MPI_Close_port inside one job: the world is cut in two halves (the lower
 * one accepts, the upper one connects; the port travels through the name
 * service), and the intercommunicator they make is used for point-to-point
 * (small and large messages, MPI_ANY_SOURCE), collectives on the
 * intercommunicator, MPI_Comm_dup, MPI_Intercomm_merge (the accepting group
 * first) and MPI_Comm_disconnect; twice, with other roots. Then the errors:
 * MPI_ERR_PORT for closing a port not open, connecting to a closed port, to a
 * name that is no port, and (under madmpi, MADMPI_DPM_TIMEOUT=2) to a port
 * nobody accepts on. On one rank only the errors are checked.
 *
 * `connect server FILE` / `connect client FILE`: two jobs instead of two
 * halves of one; the server's root writes the port name to FILE, the client's
 * root reads it, and the whole world of each job is one group.
 */
#define _POSIX_C_SOURCE 200809L
#include "../p2p/common.h"

#include <time.h>

#define SERVICE "madmpi-connect-test"
#define BIG (1 << 20)

static void use(MPI_Comm inter, int accepting, int lsize, int rsize, int lrank)
{
    int flag, n;
    MPI_OK(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag);
    MPI_OK(MPI_Comm_remote_size(inter, &n));
    CHECKF(n == rsize, "remote size %d, expected %d", n, rsize);
    MPI_OK(MPI_Comm_size(inter, &n));
    CHECK(n == lsize);

    /* Point to point: local rank r sends to remote rank r % rsize; every
     * remote rank receives from the local ranks that send to it. */
    int v = 1000 * accepting + lrank, got;
    MPI_Request req;
    MPI_OK(MPI_Isend(&v, 1, MPI_INT, lrank % rsize, 7, inter, &req));
    for (int r = 0; r < rsize; r++) {
        if (r % lsize != lrank)
            continue;
        MPI_Status st;
        MPI_OK(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 7, inter, &st));
        CHECKF(got == 1000 * !accepting + st.MPI_SOURCE, "got %d from %d", got,
               st.MPI_SOURCE);
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));

    /* A large message (rendezvous over the dynamic TCP driver) between the
     * two roots, both ways. */
    if (lrank == 0) {
        unsigned char *buf = xmalloc(BIG);
        if (accepting) {
            fill(buf, BIG, 3, 5);
            MPI_OK(MPI_Send(buf, BIG, MPI_BYTE, 0, 8, inter));
            MPI_OK(MPI_Recv(buf, BIG, MPI_BYTE, 0, 9, inter, MPI_STATUS_IGNORE));
            CHECKF(verify(buf, BIG, 7, 11) < 0, "large message back corrupted at %ld",
                   verify(buf, BIG, 7, 11));
        } else {
            MPI_OK(MPI_Recv(buf, BIG, MPI_BYTE, 0, 8, inter, MPI_STATUS_IGNORE));
            CHECKF(verify(buf, BIG, 3, 5) < 0, "large message corrupted at %ld",
                   verify(buf, BIG, 3, 5));
            fill(buf, BIG, 7, 11);
            MPI_OK(MPI_Send(buf, BIG, MPI_BYTE, 0, 9, inter));
        }
        free(buf);
    }

    /* Collectives on the intercommunicator: a broadcast from the accepting
     * root, an allreduce (each side gets the other side's sum). */
    int b = accepting ? 4242 : -1;
    if (accepting)
        MPI_OK(MPI_Bcast(&b, 1, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    else
        MPI_OK(MPI_Bcast(&b, 1, MPI_INT, 0, inter));
    CHECKF(accepting || b == 4242, "bcast gave %d", b);
    int one = accepting ? 1 : 100, sum = 0;
    MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECKF(sum == (accepting ? 100 : 1) * rsize, "intercomm allreduce %d", sum);

    /* A duplicate works as well. */
    MPI_Comm dup;
    MPI_OK(MPI_Comm_dup(inter, &dup));
    MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup));
    CHECKF(sum == (accepting ? 100 : 1) * rsize, "dup allreduce %d", sum);
    MPI_OK(MPI_Comm_free(&dup));

    /* Merged: the same `high` on both sides puts the accepting group first. */
    MPI_Comm merged;
    int mr, ms;
    MPI_OK(MPI_Intercomm_merge(inter, 0, &merged));
    MPI_OK(MPI_Comm_rank(merged, &mr));
    MPI_OK(MPI_Comm_size(merged, &ms));
    CHECK(ms == lsize + rsize);
    CHECKF(mr == (accepting ? lrank : rsize + lrank), "merged rank %d", mr);
    int all = 0;
    MPI_OK(MPI_Allreduce(&mr, &all, 1, MPI_INT, MPI_SUM, merged));
    CHECK(all == ms * (ms - 1) / 2);
    MPI_OK(MPI_Barrier(merged));
    MPI_OK(MPI_Comm_free(&merged));
    /* The other order: the connecting group asks to go first. */
    MPI_OK(MPI_Intercomm_merge(inter, accepting, &merged));
    MPI_OK(MPI_Comm_rank(merged, &mr));
    CHECKF(mr == (accepting ? rsize + lrank : lrank), "merged (high) rank %d", mr);
    MPI_OK(MPI_Comm_free(&merged));
}

/* Two jobs: the world of the server accepts, the world of the client connects. */
static void two_jobs(int server, const char *file)
{
    char port[MPI_MAX_PORT_NAME] = {0};
    MPI_Comm inter;
    if (server) {
        if (t_rank == 0) {
            MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.tmp", file);
            FILE *f = fopen(tmp, "w");
            CHECK(f != NULL);
            fprintf(f, "%s\n", port);
            fclose(f);
            CHECK(rename(tmp, file) == 0);
        }
        MPI_OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        if (t_rank == 0)
            MPI_OK(MPI_Close_port(port));
    } else {
        if (t_rank == 0) {
            FILE *f = NULL;
            for (int i = 0; i < 6000 && !(f = fopen(file, "r")); i++)
                nanosleep(&(struct timespec){0, 10000000}, NULL);
            CHECKF(f != NULL, "no port name in %s", file);
            CHECK(fgets(port, sizeof port, f) != NULL);
            fclose(f);
            port[strcspn(port, "\n")] = 0;
        }
        MPI_OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
    }
    int rsize;
    MPI_OK(MPI_Comm_remote_size(inter, &rsize));
    use(inter, server, t_size, rsize, t_rank);
    MPI_OK(MPI_Comm_disconnect(&inter));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    char port[MPI_MAX_PORT_NAME];
    if (argc == 3) {
        two_jobs(strcmp(argv[1], "server") == 0, argv[2]);
        t_done("connect");
        return 0;
    }

    if (t_size >= 2) {
        int half = t_size / 2;
        int accepting = t_rank < half;
        MPI_Comm side;
        MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, accepting, t_rank, &side));
        int lrank, lsize;
        MPI_OK(MPI_Comm_rank(side, &lrank));
        MPI_OK(MPI_Comm_size(side, &lsize));
        int rsize = t_size - lsize;
        for (int round = 0; round < 2; round++) {
            int root = round == 0 ? 0 : lsize - 1;
            MPI_Comm inter;
            if (accepting) {
                if (lrank == root) {
                    MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
                    MPI_OK(MPI_Publish_name(SERVICE, MPI_INFO_NULL, port));
                }
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                MPI_OK(MPI_Comm_accept(port, MPI_INFO_NULL, root, side, &inter));
                if (lrank == root) {
                    MPI_OK(MPI_Unpublish_name(SERVICE, MPI_INFO_NULL, port));
                    MPI_OK(MPI_Close_port(port));
                }
            } else {
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                if (lrank == root)
                    MPI_OK(MPI_Lookup_name(SERVICE, MPI_INFO_NULL, port));
                MPI_OK(MPI_Comm_connect(port, MPI_INFO_NULL, root, side, &inter));
            }
            use(inter, accepting, lsize, rsize, lrank);
            MPI_OK(MPI_Comm_disconnect(&inter));
            CHECK(inter == MPI_COMM_NULL);
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        }
        MPI_OK(MPI_Comm_free(&side));
    }

    /* Errors, on every rank alone. */
    EXPECT_CLASS(MPI_Close_port("madmpi-port:127.0.0.1:1/00"), MPI_ERR_PORT);
    MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
    MPI_OK(MPI_Close_port(port));
    EXPECT_CLASS(MPI_Close_port(port), MPI_ERR_PORT);
    MPI_Comm c = MPI_COMM_NULL;
    EXPECT_CLASS(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &c), MPI_ERR_PORT);
    CHECK(c == MPI_COMM_NULL);
    if (is_madmpi()) {
        EXPECT_CLASS(MPI_Comm_connect("no such port", MPI_INFO_NULL, 0, MPI_COMM_SELF, &c),
                     MPI_ERR_PORT);
        EXPECT_CLASS(MPI_Comm_accept("no such port", MPI_INFO_NULL, 0, MPI_COMM_SELF, &c),
                     MPI_ERR_PORT);
        EXPECT_CLASS(MPI_Comm_accept(port, MPI_INFO_NULL, 5, MPI_COMM_SELF, &c), MPI_ERR_ROOT);
        /* Open, but nobody accepts: the connect gives up (MADMPI_DPM_TIMEOUT). */
        MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
        EXPECT_CLASS(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &c), MPI_ERR_PORT);
        MPI_OK(MPI_Close_port(port));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    t_done("connect");
    return 0;
}
