/* grequest.c - generalized requests: MPI_Grequest_start/complete with query, free and cancel
 * callbacks, completed by every wait and test call, MPI_Request_get_status, MPI_Cancel and
 * MPI_Request_free (before and after completion), mixed with ordinary requests; errors.
 * query_fn runs in the calls that report the status (not in MPI_Grequest_complete), so it sees
 * what the application changed after completing; free_fn runs after it.
 */
#include "../p2p/common.h"

typedef struct {
    int id;
    int queried;
    int freed;
    int cancelled;
    int cancel_complete;
    int query_rc;
    int free_rc;
    int freed_before_query;
} state_t;

static int query_fn(void *extra, MPI_Status *status)
{
    state_t *s = extra;
    s->queried++;
    MPI_Status_set_elements(status, MPI_INT, s->id);
    MPI_Status_set_cancelled(status, s->cancelled);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return s->query_rc;
}

static int free_fn(void *extra)
{
    state_t *s = extra;
    s->freed++;
    if (s->queried == 0)
        s->freed_before_query = 1;
    return s->free_rc;
}

static int cancel_fn(void *extra, int complete)
{
    state_t *s = extra;
    s->cancel_complete = complete;
    if (!complete)
        s->cancelled = 1;
    return MPI_SUCCESS;
}

static MPI_Request start(state_t *s, int id)
{
    memset(s, 0, sizeof *s);
    s->id = id;
    MPI_Request r;
    MPI_OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, s, &r));
    CHECK(r != MPI_REQUEST_NULL);
    return r;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    state_t s[4];
    MPI_Status st;
    int flag, idx, count;

    /* Test before completion: not done; then complete, Wait. */
    MPI_Request r = start(&s[0], 5);
    MPI_OK(MPI_Test(&r, &flag, &st));
    CHECK(!flag && r != MPI_REQUEST_NULL);
    MPI_OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(!flag);
    MPI_OK(MPI_Grequest_complete(r));
    CHECK(s[0].queried == 0 && s[0].freed == 0);
    MPI_OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(flag && r != MPI_REQUEST_NULL && s[0].queried == 1);
    MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 5);
    EXPECT_CLASS(MPI_Grequest_complete(r), MPI_ERR_REQUEST);
    /* State changed after completion shows in the status of the completion call. */
    s[0].id = 15;
    MPI_OK(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL && s[0].freed == 1 && s[0].queried == 2);
    CHECK(!s[0].freed_before_query);
    MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 15);

    /* Testall / Waitany / Waitsome / Testsome / Testany with an ordinary request. */
    MPI_Request rs[3];
    int x = t_rank, y = -1;
    rs[0] = start(&s[0], 1);
    rs[1] = start(&s[1], 2);
    MPI_OK(MPI_Irecv(&y, 1, MPI_INT, t_rank, 3, MPI_COMM_WORLD, &rs[2]));
    MPI_OK(MPI_Testall(3, rs, &flag, MPI_STATUSES_IGNORE));
    CHECK(!flag);
    MPI_OK(MPI_Testany(3, rs, &idx, &flag, &st));
    CHECK(!flag);
    MPI_OK(MPI_Grequest_complete(rs[1]));
    MPI_OK(MPI_Waitany(3, rs, &idx, &st));
    CHECK(idx == 1 && rs[1] == MPI_REQUEST_NULL && s[1].freed == 1);
    MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 2);
    MPI_OK(MPI_Send(&x, 1, MPI_INT, t_rank, 3, MPI_COMM_WORLD));
    MPI_OK(MPI_Grequest_complete(rs[0]));
    int outc = 0, ids[3];
    MPI_Status sts[3];
    MPI_OK(MPI_Waitsome(3, rs, &outc, ids, sts));
    CHECK(outc >= 1);
    if (outc < 2) {
        int more = 0;
        MPI_OK(MPI_Waitsome(3, rs, &more, ids + outc, sts + outc));
        outc += more;
    }
    CHECK(outc == 2 && s[0].freed == 1 && y == t_rank);
    MPI_OK(MPI_Testsome(3, rs, &outc, ids, sts));
    CHECK(outc == MPI_UNDEFINED);

    /* Waitall and Testall. */
    rs[0] = start(&s[0], 3);
    rs[1] = start(&s[1], 4);
    MPI_OK(MPI_Grequest_complete(rs[0]));
    MPI_OK(MPI_Testall(2, rs, &flag, sts));
    CHECK(!flag && rs[0] != MPI_REQUEST_NULL && s[0].freed == 0);
    MPI_OK(MPI_Grequest_complete(rs[1]));
    MPI_OK(MPI_Testall(2, rs, &flag, sts));
    CHECK(flag && rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL);
    CHECK(s[0].freed == 1 && s[1].freed == 1);
    MPI_OK(MPI_Get_count(&sts[1], MPI_INT, &count));
    CHECK(count == 4);
    rs[0] = start(&s[0], 6);
    rs[1] = start(&s[1], 7);
    MPI_OK(MPI_Grequest_complete(rs[1]));
    MPI_OK(MPI_Grequest_complete(rs[0]));
    MPI_OK(MPI_Waitall(2, rs, sts));
    CHECK(s[0].freed == 1 && s[1].freed == 1);

    /* Cancel before completion: cancel_fn(complete = 0); the status says cancelled. */
    r = start(&s[2], 8);
    MPI_OK(MPI_Cancel(&r));
    CHECK(s[2].cancelled == 1 && s[2].cancel_complete == 0);
    MPI_OK(MPI_Grequest_complete(r));
    MPI_OK(MPI_Wait(&r, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag);
    /* Cancel after completion: cancel_fn(complete = 1), not cancelled. */
    r = start(&s[2], 9);
    MPI_OK(MPI_Grequest_complete(r));
    MPI_OK(MPI_Cancel(&r));
    CHECK(s[2].cancel_complete == 1);
    MPI_OK(MPI_Wait(&r, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag && s[2].freed == 1);

    /* Request_free before completion: the handle stays good for Grequest_complete, which
     * then frees (free_fn once). After completion: free_fn at once. */
    r = start(&s[3], 10);
    MPI_Request keep = r;
    MPI_OK(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL && s[3].freed == 0);
    MPI_OK(MPI_Grequest_complete(keep));
    CHECK(s[3].freed == 1 && s[3].queried == 0);
    r = start(&s[3], 11);
    MPI_OK(MPI_Grequest_complete(r));
    MPI_OK(MPI_Request_free(&r));
    CHECK(s[3].freed == 1);

    /* A query_fn error is the completion's error. */
    r = start(&s[0], 12);
    s[0].query_rc = MPI_ERR_OTHER;
    MPI_OK(MPI_Grequest_complete(r));
    EXPECT_CLASS(MPI_Wait(&r, &st), MPI_ERR_OTHER);
    CHECK(s[0].freed == 1);
    /* So is a free_fn error when query_fn succeeded, and the request is gone all the same. */
    r = start(&s[0], 13);
    s[0].free_rc = MPI_ERR_BUFFER;
    MPI_OK(MPI_Grequest_complete(r));
    EXPECT_CLASS(MPI_Wait(&r, &st), MPI_ERR_BUFFER);
    CHECK(r == MPI_REQUEST_NULL && s[0].freed == 1 && s[0].queried == 1);
    /* Testany/Waitall report the query_fn of each generalized request. */
    rs[0] = start(&s[0], 16);
    rs[1] = start(&s[1], 17);
    MPI_OK(MPI_Grequest_complete(rs[0]));
    MPI_OK(MPI_Grequest_complete(rs[1]));
    s[1].id = 18;
    MPI_OK(MPI_Testany(2, rs, &idx, &flag, &st));
    CHECK(flag && idx == 0 && s[0].queried == 1 && s[1].queried == 0);
    MPI_OK(MPI_Waitall(2, rs, sts));
    MPI_OK(MPI_Get_count(&sts[1], MPI_INT, &count));
    CHECK(count == 18 && s[1].queried == 1 && s[1].freed == 1);

    /* NULL callbacks are allowed. */
    MPI_OK(MPI_Grequest_start(NULL, NULL, NULL, NULL, &r));
    MPI_OK(MPI_Grequest_complete(r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));

    /* Errors. */
    EXPECT_CLASS(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s[0], NULL), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Grequest_complete(MPI_REQUEST_NULL), MPI_ERR_REQUEST);
    MPI_OK(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    EXPECT_CLASS(MPI_Grequest_complete(r), MPI_ERR_REQUEST);
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));

    t_done("grequest");
    return 0;
}
