/* errors.c - error handling with MPI_ERRORS_RETURN: invalid rank, tag,
 * count, buffer, communicator, datatype, request (null, freed, wrong kind),
 * keyval; the class of each code (MPI_Error_class) and its text
 * (MPI_Error_string); a user error handler (called with the communicator and
 * the code, the call then returns the code); MPI_Comm_call_errhandler;
 * MPI_Comm_get_errhandler / MPI_Errhandler_free; user error classes, codes
 * and strings (and their removal, MPI-4.1); MPI_LASTUSEDCODE; a spawn of a
 * program that does not exist answering MPI_ERR_SPAWN on every rank.
 * 2 ranks. */
#include "common.h"

static int handler_calls = 0;
static int handler_code = 0;
static MPI_Comm handler_comm = MPI_COMM_NULL;

static void my_handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_comm = *comm;
}

/* A handler that sets the code the call returns (MPICH's errors/io/fileerrret
 * does this on a file). */
static void clearing_handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_calls++;
    handler_code = *code;
    *code = MPI_SUCCESS;
}

static void check_string(int code, const char *must_contain)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = -1;
    memset(s, 'x', sizeof s);
    MPI_OK(MPI_Error_string(code, s, &len));
    CHECKF(len >= 0 && len < MPI_MAX_ERROR_STRING && (size_t)len == strlen(s), "code %d: len %d", code, len);
    if (must_contain)
        CHECKF(strstr(s, must_contain) != NULL, "code %d: string '%s' lacks '%s'", code, s, must_contain);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size >= 2);
    int madmpi = is_madmpi();
    int v = 0;
    MPI_Request r;
    MPI_Status st;

    /* The default is MPI_ERRORS_ARE_FATAL. */
    MPI_Errhandler eh;
    MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    MPI_OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);

    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    MPI_OK(MPI_Errhandler_free(&eh));

    /* Invalid arguments. */
    EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, t_size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Recv(&v, 1, MPI_INT, t_size + 3, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Isend(&v, 1, MPI_INT, t_size, 0, MPI_COMM_WORLD, &r), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, 1 - t_rank, -5, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Recv(&v, 1, MPI_INT, 1 - t_rank, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
    {
        int *ub = NULL, flag = 0;
        MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
        if (*ub < 2147483647)
            EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, 1 - t_rank, *ub + 1, MPI_COMM_WORLD), MPI_ERR_TAG);
    }
    /* MPI_PROC_NULL makes no operation of invalid arguments (as in MPICH and Open MPI) */
    EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, -3, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Isend(&v, 1, MPI_INT, MPI_PROC_NULL, -3, MPI_COMM_WORLD, &r), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, -3, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Iprobe(MPI_PROC_NULL, -3, MPI_COMM_WORLD, &v, &st), MPI_ERR_TAG);
    {
        MPI_Datatype unc;
        MPI_OK(MPI_Type_contiguous(2, MPI_INT, &unc));
        EXPECT_CLASS(MPI_Send(&v, 1, unc, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
        MPI_OK(MPI_Type_free(&unc));
    }
    MPI_OK(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    MPI_OK(MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    EXPECT_CLASS(MPI_Send(&v, -1, MPI_INT, 1 - t_rank, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Irecv(&v, -3, MPI_INT, 1 - t_rank, 0, MPI_COMM_WORLD, &r), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Send(NULL, 4, MPI_INT, 1 - t_rank, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_rank(MPI_COMM_NULL, &v), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Send(&v, 1, MPI_DATATYPE_NULL, 1 - t_rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Recv(&v, 1, MPI_DATATYPE_NULL, 1 - t_rank, 0, MPI_COMM_WORLD, &st), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Get_count(&st, MPI_DATATYPE_NULL, &v), MPI_ERR_TYPE);
    r = MPI_REQUEST_NULL;
    EXPECT_CLASS(MPI_Request_free(&r), MPI_ERR_REQUEST);
    EXPECT_CLASS(MPI_Start(&r), MPI_ERR_REQUEST);
    {
        int *p = NULL, flag = 0;
        EXPECT_CLASS(MPI_Comm_get_attr(MPI_COMM_WORLD, 123456, &p, &flag), MPI_ERR_KEYVAL);
    }
    if (madmpi) {
        /* Handles madmpi can tell apart (MPICH's are not all checked). */
        EXPECT_CLASS(MPI_Send(&v, 1, (MPI_Datatype)MPI_COMM_WORLD, 1 - t_rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
        EXPECT_CLASS(MPI_Send(&v, 1, MPI_INT, 1 - t_rank, 0, (MPI_Comm)MPI_INT), MPI_ERR_COMM);
        MPI_Request bogus = (MPI_Request)MPI_COMM_WORLD;
        EXPECT_CLASS(MPI_Wait(&bogus, &st), MPI_ERR_REQUEST);
        /* a freed request */
        MPI_OK(MPI_Isend(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
        MPI_Request copy = r;
        MPI_OK(MPI_Wait(&r, &st));
        EXPECT_CLASS(MPI_Wait(&copy, &st), MPI_ERR_REQUEST);
        EXPECT_CLASS(MPI_Test(&copy, &v, &st), MPI_ERR_REQUEST);
        MPI_Request arr[2] = {MPI_REQUEST_NULL, copy};
        EXPECT_CLASS(MPI_Waitall(2, arr, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
        /* a non-persistent request cannot be started */
        MPI_OK(MPI_Irecv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
        EXPECT_CLASS(MPI_Start(&r), MPI_ERR_REQUEST);
        MPI_OK(MPI_Wait(&r, &st));
        /* invalid message handle */
        MPI_Message m = MPI_MESSAGE_NULL;
        EXPECT_CLASS(MPI_Mrecv(&v, 1, MPI_INT, &m, &st), MPI_ERR_REQUEST);
        /* garbage error handler */
        EXPECT_CLASS(MPI_Comm_set_errhandler(MPI_COMM_WORLD, (MPI_Errhandler)MPI_COMM_WORLD), MPI_ERR_ARG);
        /* unknown error codes */
        EXPECT_CLASS(MPI_Error_class(-5, &v), MPI_ERR_ARG);
        EXPECT_CLASS(MPI_Error_class(99999, &v), MPI_ERR_ARG);
        /* a spawn of a program that does not exist: refused before anything starts, on
         * every rank (the root's failure reaches the others) */
        MPI_Comm child = MPI_COMM_WORLD;
        int codes[1] = {MPI_SUCCESS};
        int rc = MPI_Comm_spawn("./no-such-program-madmpi", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0,
                                MPI_COMM_WORLD, &child, codes);
        CHECKF(err_class(rc) == MPI_ERR_SPAWN, "MPI_Comm_spawn rc %d", rc);
        CHECK(child == MPI_COMM_NULL);
        /* its string is its class's (the fatal test checks the handler's message, which
         * names the call and the program) */
        check_string(rc, "MPI_ERR_SPAWN");
    }
    /* Nothing above may have sent anything: the peer must not see a message. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    {
        int flag = 1;
        MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 0);
    }
    /* Nobody sends again before every rank has probed. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Classes and strings of the predefined codes. */
    static const int classes[] = {MPI_SUCCESS, MPI_ERR_BUFFER, MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_TAG,
                                  MPI_ERR_COMM, MPI_ERR_RANK, MPI_ERR_REQUEST, MPI_ERR_ROOT, MPI_ERR_GROUP,
                                  MPI_ERR_OP, MPI_ERR_TOPOLOGY, MPI_ERR_DIMS, MPI_ERR_ARG, MPI_ERR_UNKNOWN,
                                  MPI_ERR_TRUNCATE, MPI_ERR_OTHER, MPI_ERR_INTERN, MPI_ERR_PENDING,
                                  MPI_ERR_IN_STATUS, MPI_ERR_ACCESS, MPI_ERR_KEYVAL, MPI_ERR_NO_MEM,
                                  MPI_ERR_UNSUPPORTED_OPERATION, MPI_ERR_WIN, MPI_ERR_PROC_ABORTED,
#ifdef MPI_ERR_ABI
                                  MPI_ERR_ERRHANDLER, MPI_ERR_ABI,
#endif
                                  MPI_ERR_LASTCODE};
    for (size_t i = 0; i + 1 < sizeof classes / sizeof classes[0]; i++) {
        int c = -1;
        MPI_OK(MPI_Error_class(classes[i], &c));
        CHECKF(c == classes[i], "class of %d is %d", classes[i], c);
        check_string(classes[i], NULL);
    }
    if (madmpi) {
        check_string(MPI_ERR_RANK, "MPI_ERR_RANK");
        check_string(MPI_ERR_TRUNCATE, "truncated");
    }

    /* A user error handler. */
    MPI_Errhandler mine;
    MPI_OK(MPI_Comm_create_errhandler(my_handler, &mine));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine));
    MPI_OK(MPI_Errhandler_free(&mine)); /* still attached: stays alive */
    CHECK(mine == MPI_ERRHANDLER_NULL);
    int rc = MPI_Send(&v, 1, MPI_INT, t_size + 1, 0, MPI_COMM_WORLD);
    CHECK(handler_calls == 1 && handler_code == rc && handler_comm == MPI_COMM_WORLD);
    CHECK(err_class(rc) == MPI_ERR_RANK);
    MPI_OK(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER);
    MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, eh)); /* shared by two communicators */
    MPI_OK(MPI_Errhandler_free(&eh));
    rc = MPI_Send(&v, 1, MPI_INT, 5, 0, MPI_COMM_SELF);
    CHECK(handler_calls == 3 && handler_comm == MPI_COMM_SELF && err_class(rc) == MPI_ERR_RANK);
    /* The call returns the code as the handler left it. */
    {
        MPI_Errhandler clearing, prev;
        MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_SELF, &prev));
        MPI_OK(MPI_Comm_create_errhandler(clearing_handler, &clearing));
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, clearing));
        MPI_OK(MPI_Errhandler_free(&clearing));
        rc = MPI_Send(&v, 1, MPI_INT, 5, 0, MPI_COMM_SELF);
        CHECK(handler_calls == 4 && err_class(handler_code) == MPI_ERR_RANK && rc == MPI_SUCCESS);
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, prev));
        MPI_OK(MPI_Errhandler_free(&prev));
    }
    /* The error of a request goes to its communicator's handler (here: a
     * truncation found by MPI_Wait on MPI_COMM_WORLD, while MPI_COMM_SELF's
     * handler is the same function). */
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    if (t_rank == 0) {
        int two[2] = {1, 2};
        MPI_OK(MPI_Send(two, 2, MPI_INT, 1, 50, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        int one = 0;
        MPI_OK(MPI_Irecv(&one, 1, MPI_INT, 0, 50, MPI_COMM_WORLD, &r));
        rc = MPI_Wait(&r, &st);
        CHECK(err_class(rc) == MPI_ERR_TRUNCATE && r == MPI_REQUEST_NULL);
        CHECKF(handler_calls == 5 && handler_comm == MPI_COMM_WORLD && handler_code == rc,
               "calls %d code %d", handler_calls, handler_code);
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* call_errhandler with MPI_ERRORS_RETURN returns MPI_SUCCESS (MPICH and Open MPI) */
    int calls = handler_calls;
    MPI_OK(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER));
    CHECK(handler_calls == calls);

    /* User classes, codes and strings. */
    int *lastp = NULL, flag = 0;
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastp, &flag));
    CHECK(flag == 1);
    int cls = -1, code = -1, code2 = -1, c = -1;
    MPI_OK(MPI_Add_error_class(&cls));
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastp, &flag));
    CHECKF(cls <= *lastp, "class %d above lastusedcode %d", cls, *lastp);
    if (madmpi)
        CHECK(cls > MPI_ERR_LASTCODE);
    MPI_OK(MPI_Error_class(cls, &c));
    CHECK(c == cls);
    MPI_OK(MPI_Add_error_code(cls, &code));
    MPI_OK(MPI_Add_error_code(MPI_ERR_RANK, &code2));
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastp, &flag));
    CHECK(code != cls);
    if (madmpi) /* (MPICH's codes are encoded beyond its MPI_LASTUSEDCODE) */
        CHECK(code <= *lastp && code2 <= *lastp && code2 > code && code > cls);
    MPI_OK(MPI_Error_class(code, &c));
    CHECK(c == cls);
    MPI_OK(MPI_Error_class(code2, &c));
    CHECK(c == MPI_ERR_RANK);
    if (madmpi)
        check_string(code, ""); /* no string yet: empty */
    MPI_OK(MPI_Add_error_string(code, "my very own error"));
    MPI_OK(MPI_Add_error_string(cls, "my error class"));
    check_string(code, "my very own error");
    check_string(cls, "my error class");
    /* user codes go through handlers like others */
    rc = MPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
    CHECK(rc == MPI_SUCCESS);
    if (madmpi) {
        EXPECT_CLASS(MPI_Add_error_code(code, &c), MPI_ERR_ARG); /* a code is no class */
        EXPECT_CLASS(MPI_Add_error_string(MPI_ERR_RANK, "nope"), MPI_ERR_ARG);
    }
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    EXPECT_CLASS(MPI_Remove_error_class(cls), MPI_ERR_ARG); /* still has a code */
    MPI_OK(MPI_Remove_error_string(code));
    MPI_OK(MPI_Remove_error_code(code));
    MPI_OK(MPI_Remove_error_string(cls));
    MPI_OK(MPI_Remove_error_class(cls));
    MPI_OK(MPI_Remove_error_code(code2));
    EXPECT_CLASS(MPI_Error_class(code, &c), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Remove_error_class(MPI_ERR_RANK), MPI_ERR_ARG);
#endif

    /* Before the finalize barrier: every handler back to fatal. */
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    t_done("errors");
    return 0;
}
