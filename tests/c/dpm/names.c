/* names.c - the name service of dynamic process management: MPI_Publish_name,
 * MPI_Lookup_name, MPI_Unpublish_name across the ranks of a job (and in a
 * singleton, where the process is the whole scope), service and port names
 * with spaces and symbols, and the error classes the standard names:
 * MPI_ERR_NAME for a lookup that finds nothing, MPI_ERR_SERVICE for an
 * unpublish of a name not published, MPI_ERR_ARG for NULL strings.
 */
#include "../p2p/common.h"

#define SHARED "madmpi test service = shared/1 %"
#define SHARED_PORT "tcp:127.0.0.1:4242 job=names\\x"

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    char port[MPI_MAX_PORT_NAME];
    char mine[64], myport[64];

    /* Nothing published yet. */
    EXPECT_CLASS(MPI_Lookup_name(SHARED, MPI_INFO_NULL, port), MPI_ERR_NAME);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* One name published by rank 0, seen by everyone. */
    if (t_rank == 0)
        MPI_OK(MPI_Publish_name(SHARED, MPI_INFO_NULL, SHARED_PORT));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    memset(port, 0, sizeof port);
    MPI_OK(MPI_Lookup_name(SHARED, MPI_INFO_NULL, port));
    CHECKF(strcmp(port, SHARED_PORT) == 0, "looked up '%s'", port);
    /* A second publication of the same name is refused, by any rank. */
    if (is_madmpi())
        EXPECT_CLASS(MPI_Publish_name(SHARED, MPI_INFO_NULL, "elsewhere"), MPI_ERR_NAME);

    /* Every rank publishes a name of its own; every rank finds all of them. */
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "unused_key", "ignored"));
    snprintf(mine, sizeof mine, "service-of-rank-%d", t_rank);
    snprintf(myport, sizeof myport, "port of rank %d", t_rank);
    MPI_OK(MPI_Publish_name(mine, info, myport));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int r = 0; r < t_size; r++) {
        char svc[64], want[64];
        snprintf(svc, sizeof svc, "service-of-rank-%d", r);
        snprintf(want, sizeof want, "port of rank %d", r);
        MPI_OK(MPI_Lookup_name(svc, info, port));
        CHECKF(strcmp(port, want) == 0, "%s: looked up '%s'", svc, port);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* Unpublishing with another port than the one published is an error. */
    if (is_madmpi())
        EXPECT_CLASS(MPI_Unpublish_name(mine, MPI_INFO_NULL, "not my port"), MPI_ERR_SERVICE);
    MPI_OK(MPI_Unpublish_name(mine, info, myport));
    EXPECT_CLASS(MPI_Unpublish_name(mine, MPI_INFO_NULL, myport), MPI_ERR_SERVICE);
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    EXPECT_CLASS(MPI_Lookup_name(mine, MPI_INFO_NULL, port), MPI_ERR_NAME);

    /* Withdrawn, the shared name can be published again (by the last rank). */
    if (t_rank == 0)
        MPI_OK(MPI_Unpublish_name(SHARED, MPI_INFO_NULL, SHARED_PORT));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    EXPECT_CLASS(MPI_Lookup_name(SHARED, MPI_INFO_NULL, port), MPI_ERR_NAME);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == t_size - 1)
        MPI_OK(MPI_Publish_name(SHARED, MPI_INFO_NULL, "second port"));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Lookup_name(SHARED, MPI_INFO_NULL, port));
    CHECKF(strcmp(port, "second port") == 0, "looked up '%s'", port);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == t_size - 1)
        MPI_OK(MPI_Unpublish_name(SHARED, MPI_INFO_NULL, "second port"));

    /* Bad arguments. */
    if (is_madmpi()) {
        EXPECT_CLASS(MPI_Publish_name(NULL, MPI_INFO_NULL, "p"), MPI_ERR_ARG);
        EXPECT_CLASS(MPI_Publish_name("s", MPI_INFO_NULL, NULL), MPI_ERR_ARG);
        EXPECT_CLASS(MPI_Publish_name("s", MPI_INFO_NULL, ""), MPI_ERR_PORT);
        EXPECT_CLASS(MPI_Lookup_name("s", MPI_INFO_NULL, NULL), MPI_ERR_ARG);
        EXPECT_CLASS(MPI_Lookup_name("", MPI_INFO_NULL, port), MPI_ERR_NAME);
        EXPECT_CLASS(MPI_Unpublish_name(NULL, MPI_INFO_NULL, "p"), MPI_ERR_ARG);
        /* A name too long for the process manager's lines. */
        static char longname[2048];
        memset(longname, 'n', sizeof longname - 1);
        EXPECT_CLASS(MPI_Publish_name(longname, MPI_INFO_NULL, "p"), MPI_ERR_NAME);
        EXPECT_CLASS(MPI_Lookup_name(longname, MPI_INFO_NULL, port), MPI_ERR_NAME);
    }
    t_done("names");
    return 0;
}
