/* Compiled (not linked) as C99, C11 and C++ with -Wall -Wextra -Werror -pedantic by
 * tests/tests/abi_header.rs: the header must be clean in all of them, and the constructs a
 * program uses with it (callbacks, statuses, predefined handles in initializers) must type-check. */

#include <mpi.h>

static void sum_ints(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype)
{
    int i;
    (void)datatype;
    for (i = 0; i < *len; i++) {
        ((int *)inoutvec)[i] += ((int *)invec)[i];
    }
}

static int copy_attr(MPI_Comm oldcomm, int keyval, void *extra_state, void *in, void *out,
                     int *flag)
{
    (void)oldcomm; (void)keyval; (void)extra_state;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void on_error(MPI_Comm *comm, int *error_code, ...)
{
    (void)comm; (void)error_code;
}

static const MPI_Datatype pair_types[2] = { MPI_INT, MPI_DOUBLE };

int use_the_header(int argc, char **argv);

int use_the_header(int argc, char **argv)
{
    MPI_Status status;
    MPI_Status statuses[2];
    MPI_Op op = MPI_OP_NULL;
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    MPI_Request requests[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    MPI_Aint disp = MPI_Aint_add((MPI_Aint)0, (MPI_Aint)8);
    MPI_Count count = 0;
    MPI_Offset offset = MPI_DISPLACEMENT_CURRENT;
    MPI_Fint f_status[MPI_F_STATUS_SIZE];
    int keyval = MPI_KEYVAL_INVALID;
    int ranges[1][3] = { { 0, 3, 1 } };
    MPI_Group group = MPI_GROUP_EMPTY, newgroup;
    int rc = MPI_Init(&argc, &argv);

    rc |= MPI_Op_create(sum_ints, 1, &op);
    rc |= MPI_Comm_create_keyval(copy_attr, MPI_COMM_NULL_DELETE_FN, &keyval, NULL);
    rc |= MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &keyval, NULL);
    rc |= MPI_Comm_create_errhandler(on_error, &handler);
    rc |= MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc |= MPI_Sendrecv(MPI_IN_PLACE, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_BOTTOM, 0, MPI_BYTE,
                       MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &status);
    rc |= MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    rc |= MPI_Waitall(2, requests, statuses);
    rc |= MPI_Get_count_c(&status, pair_types[0], &count);
    rc |= MPI_Status_c2f(&status, f_status);
    rc |= MPI_Group_range_incl(group, 1, ranges, &newgroup);
    rc |= MPI_Pcontrol(1, "label", 2.0);
    rc |= MPI_Comm_spawn("prog", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF,
                         (MPI_Comm *)0, MPI_ERRCODES_IGNORE);
    rc |= status.MPI_SOURCE + status.MPI_TAG + status.MPI_ERROR;
    rc |= (int)(disp + count + offset) + MPI_Comm_c2f(MPI_COMM_WORLD);
    (void)MPI_Wtime();
    return rc | MPI_Finalize();
}
