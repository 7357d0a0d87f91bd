/* sessions.c - the sessions model without MPI_Init: MPI_Session_init/finalize, the process
 * sets (mpi://WORLD, mpi://SELF, one per node), groups and communicators made from them
 * (MPI_Comm_create_from_group, by the members alone; MPI_Intercomm_create_from_groups),
 * traffic with byte checks on them, session error handlers and info; a second session after
 * the first was finalized.
 */
#include "../p2p/common.h"

static int handler_calls, handler_code;

static void on_error(MPI_Session *s, int *code, ...)
{
    (void)s;
    handler_calls++;
    handler_code = *code;
}

/* Ring exchange with byte checks on `c` (round `k`). */
static void ring(MPI_Comm c, unsigned k)
{
    int r, n;
    MPI_OK(MPI_Comm_rank(c, &r));
    MPI_OK(MPI_Comm_size(c, &n));
    enum { N = 5000 };
    unsigned char out[N], in[N];
    fill(out, N, (unsigned)r, k);
    MPI_OK(MPI_Sendrecv(out, N, MPI_BYTE, (r + 1) % n, 4, in, N, MPI_BYTE, (r + n - 1) % n, 4, c,
                        MPI_STATUS_IGNORE));
    long bad = verify(in, N, (unsigned)((r + n - 1) % n), k);
    CHECKF(bad < 0, "ring round %u: byte %ld", k, bad);
    int sum = 0, want = n * (n - 1) / 2;
    MPI_OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECKF(sum == want, "allreduce %d, want %d", sum, want);
}

static int has_pset(MPI_Session s, const char *want)
{
    int n = 0;
    MPI_OK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    for (int i = 0; i < n; i++) {
        int len = 0;
        MPI_OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL));
        CHECK(len > 1);
        char *name = xmalloc((size_t)len);
        MPI_OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        CHECK((int)strlen(name) == len - 1);
        int hit = strcmp(name, want) == 0;
        free(name);
        if (hit)
            return 1;
    }
    return 0;
}

int main(void)
{
    MPI_Info info;
    MPI_Session s;
    int flag = 1;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "thread_level", "MPI_THREAD_MULTIPLE"));
    MPI_OK(MPI_Session_init(info, MPI_ERRORS_RETURN, &s));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Initialized(&flag));
    CHECK(!flag); /* the world model is not initialized */

    MPI_OK(MPI_Session_get_info(s, &info));
    char val[64];
    MPI_OK(MPI_Info_get_string(info, "thread_level", &(int){sizeof val}, val, &flag));
    CHECK(flag && strcmp(val, "MPI_THREAD_MULTIPLE") == 0);
    MPI_OK(MPI_Info_free(&info));

    CHECK(has_pset(s, "mpi://WORLD"));
    CHECK(has_pset(s, "mpi://SELF"));
    CHECK(!has_pset(s, "mpi://NOWHERE"));
    if (is_madmpi())
        CHECK(has_pset(s, "madmpi://node/0"));

    /* The world process set. */
    MPI_Group world;
    MPI_OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
    MPI_OK(MPI_Group_rank(world, &t_rank));
    MPI_OK(MPI_Group_size(world, &t_size));
    MPI_OK(MPI_Session_get_pset_info(s, "mpi://WORLD", &info));
    MPI_OK(MPI_Info_get_string(info, "mpi_size", &(int){sizeof val}, val, &flag));
    CHECK(flag && atoi(val) == t_size);
    MPI_OK(MPI_Info_free(&info));

    MPI_Comm wc;
    MPI_OK(MPI_Comm_create_from_group(world, "org.madmpi.test.world", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &wc));
    int r, n;
    MPI_OK(MPI_Comm_rank(wc, &r));
    MPI_OK(MPI_Comm_size(wc, &n));
    CHECK(r == t_rank && n == t_size);
    ring(wc, 1);

    /* A second one from the same group and tag: another context. */
    MPI_Comm wc2;
    MPI_OK(MPI_Comm_create_from_group(world, "org.madmpi.test.world", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &wc2));
    int x = 100 + t_rank, y = -1;
    MPI_Request rq;
    MPI_OK(MPI_Irecv(&y, 1, MPI_INT, (t_rank + n - 1) % n, 0, wc, &rq));
    MPI_OK(MPI_Send(&x, 1, MPI_INT, (t_rank + 1) % n, 0, wc2));
    MPI_OK(MPI_Send(&x, 1, MPI_INT, (t_rank + 1) % n, 0, wc));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(y == 100 + (t_rank + n - 1) % n);
    MPI_OK(MPI_Recv(&y, 1, MPI_INT, (t_rank + n - 1) % n, 0, wc2, MPI_STATUS_IGNORE));
    CHECK(y == 100 + (t_rank + n - 1) % n);
    MPI_OK(MPI_Comm_free(&wc2));

    /* Subgroups: the even and the odd ranks, each made by its members only. */
    int parity = t_rank % 2, nsub = (n + 1 - parity) / 2;
    int *ranks = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < nsub; i++)
        ranks[i] = 2 * i + parity;
    MPI_Group mine, other;
    MPI_OK(MPI_Group_incl(world, nsub, ranks, &mine));
    MPI_Comm sub;
    MPI_OK(MPI_Comm_create_from_group(mine, parity ? "odd" : "even", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &sub));
    MPI_OK(MPI_Comm_size(sub, &r));
    CHECK(r == nsub);
    ring(sub, 2);
    MPI_OK(MPI_Comm_free(&sub));

    /* The intercommunicator between them. */
    if (n >= 2) {
        int nother = n - nsub;
        for (int i = 0; i < nother; i++)
            ranks[i] = 2 * i + 1 - parity;
        MPI_OK(MPI_Group_incl(world, nother, ranks, &other));
        MPI_Comm inter;
        MPI_OK(MPI_Intercomm_create_from_groups(mine, 0, other, 0, "org.madmpi.test.inter",
                                                MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
        int remote = -1, is_inter = 0;
        MPI_OK(MPI_Comm_test_inter(inter, &is_inter));
        MPI_OK(MPI_Comm_remote_size(inter, &remote));
        CHECK(is_inter && remote == nother);
        int lr;
        MPI_OK(MPI_Comm_rank(inter, &lr));
        if (lr == 0) {
            unsigned char out[300], in[300];
            fill(out, sizeof out, (unsigned)parity, 7);
            MPI_OK(MPI_Sendrecv(out, 300, MPI_BYTE, 0, 1, in, 300, MPI_BYTE, 0, 1, inter,
                                MPI_STATUS_IGNORE));
            CHECK(verify(in, sizeof in, (unsigned)(1 - parity), 7) < 0);
        }
        MPI_OK(MPI_Comm_free(&inter));
        MPI_OK(MPI_Group_free(&other));
    }
    MPI_OK(MPI_Group_free(&mine));
    free(ranks);

    /* This node's process set (madmpi's name for it). */
    if (is_madmpi()) {
        MPI_Group node;
        MPI_OK(MPI_Group_from_session_pset(s, "madmpi://node/0", &node));
        int nr = MPI_UNDEFINED;
        MPI_OK(MPI_Group_rank(node, &nr));
        if (nr != MPI_UNDEFINED) {
            MPI_Comm nc;
            MPI_OK(MPI_Comm_create_from_group(node, "node", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                              &nc));
            ring(nc, 3);
            MPI_OK(MPI_Comm_free(&nc));
        }
        MPI_OK(MPI_Group_free(&node));
    }

    /* mpi://SELF. */
    MPI_Group self;
    MPI_Comm sc;
    MPI_OK(MPI_Group_from_session_pset(s, "mpi://SELF", &self));
    MPI_OK(MPI_Comm_create_from_group(self, "self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &sc));
    MPI_OK(MPI_Comm_size(sc, &r));
    CHECK(r == 1);
    ring(sc, 4);
    MPI_OK(MPI_Comm_free(&sc));
    MPI_OK(MPI_Group_free(&self));

    /* Session error handlers. */
    MPI_Errhandler eh, got;
    MPI_OK(MPI_Session_create_errhandler(on_error, &eh));
    MPI_OK(MPI_Session_set_errhandler(s, eh));
    MPI_OK(MPI_Session_get_errhandler(s, &got));
    CHECK(got == eh);
    MPI_OK(MPI_Errhandler_free(&got));
    MPI_OK(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(handler_calls == 1 && handler_code == MPI_ERR_OTHER);
    MPI_Group none;
    int rc = MPI_Group_from_session_pset(s, "mpi://NOWHERE", &none);
    CHECK(handler_calls == 2 && err_class(rc) == MPI_ERR_ARG && err_class(handler_code) == MPI_ERR_ARG);
    MPI_OK(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Errhandler_free(&eh));
    EXPECT_CLASS(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 1000, &(int){10}, val), MPI_ERR_ARG);

    /* A second session beside the first. */
    MPI_Session s2;
    MPI_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2));
    MPI_OK(MPI_Session_finalize(&s2));
    CHECK(s2 == MPI_SESSION_NULL);

    ring(wc, 5);
    MPI_OK(MPI_Barrier(wc));
    MPI_OK(MPI_Comm_free(&wc));
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Session_finalize(&s));
    CHECK(s == MPI_SESSION_NULL);
    MPI_OK(MPI_Initialized(&flag));
    CHECK(!flag);

    /* Sessions may be initialized again. */
    MPI_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    MPI_OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
    MPI_OK(MPI_Comm_create_from_group(world, "org.madmpi.test.again", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &wc));
    ring(wc, 6);
    MPI_OK(MPI_Barrier(wc));
    if (t_rank == 0) {
        printf("OK sessions\n");
        fflush(stdout);
    }
    MPI_OK(MPI_Comm_free(&wc));
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Session_finalize(&s));
    return 0;
}
