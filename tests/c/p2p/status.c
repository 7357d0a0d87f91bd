/* status.c - status objects filled by the user: Status_set_elements (int,
 * _c and _x) with Get_count / Get_elements, counts beyond an int,
 * Status_set_cancelled, the MPI-5 field accessors.  1 rank is enough. */
#include "common.h"

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Status st;
    int cnt = -1;
    MPI_Count c = -1;
    memset(&st, 0, sizeof st);

    MPI_OK(MPI_Status_set_elements(&st, MPI_INT, 5));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 5);
    MPI_OK(MPI_Get_elements(&st, MPI_INT, &cnt));
    CHECK(cnt == 5);
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
    CHECK(cnt == 5 * (int)sizeof(int));
    MPI_OK(MPI_Get_count(&st, MPI_DOUBLE, &cnt));
    CHECK(cnt == MPI_UNDEFINED);
    MPI_OK(MPI_Get_elements(&st, MPI_SHORT, &cnt));
    CHECK(cnt == 10);

    MPI_OK(MPI_Status_set_elements_x(&st, MPI_DOUBLE, 7));
    MPI_OK(MPI_Get_elements_x(&st, MPI_DOUBLE, &c));
    CHECK(c == 7);
    MPI_OK(MPI_Get_count_c(&st, MPI_DOUBLE, &c));
    CHECK(c == 7);
    MPI_OK(MPI_Get_elements_c(&st, MPI_BYTE, &c));
    CHECK(c == 56);

    /* More elements than an int holds. */
    MPI_Count big = (MPI_Count)5000000000LL;
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    MPI_OK(MPI_Status_set_elements_c(&st, MPI_BYTE, big));
#else
    MPI_OK(MPI_Status_set_elements_x(&st, MPI_BYTE, big));
#endif
    MPI_OK(MPI_Get_count_c(&st, MPI_BYTE, &c));
    CHECK(c == big);
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
    CHECK(cnt == MPI_UNDEFINED);
    MPI_OK(MPI_Get_elements(&st, MPI_BYTE, &cnt));
    CHECK(cnt == MPI_UNDEFINED);
    MPI_OK(MPI_Get_count_c(&st, MPI_INT, &c));
    CHECK(c == big / 4);

    /* Pair types: MPI_2INT has two basic elements. The standard: after
       MPI_Status_set_elements(count), MPI_Get_elements answers count, and MPI_Get_count the
       whole elements of the type (MPICH stores count * size instead, so this is ours only). */
    if (is_madmpi()) {
        MPI_OK(MPI_Status_set_elements(&st, MPI_2INT, 6));
        MPI_OK(MPI_Get_count(&st, MPI_2INT, &cnt));
        CHECK(cnt == 3);
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == 6);
        MPI_OK(MPI_Get_elements(&st, MPI_2INT, &cnt));
        CHECK(cnt == 6);
        MPI_OK(MPI_Status_set_elements(&st, MPI_2INT, 5));
        MPI_OK(MPI_Get_elements(&st, MPI_2INT, &cnt));
        CHECK(cnt == 5);
        MPI_OK(MPI_Get_count(&st, MPI_2INT, &cnt));
        CHECK(cnt == MPI_UNDEFINED);
    }

    /* Zero. */
    MPI_OK(MPI_Status_set_elements(&st, MPI_INT, 0));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 0);

    int flag = -1;
    MPI_OK(MPI_Status_set_cancelled(&st, 1));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1);
    MPI_OK(MPI_Status_set_cancelled(&st, 0));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 0);

#if MPI_VERSION >= 5
    int v = 0;
    MPI_OK(MPI_Status_set_source(&st, 3));
    MPI_OK(MPI_Status_set_tag(&st, 44));
    MPI_OK(MPI_Status_set_error(&st, MPI_ERR_TAG));
    CHECK(st.MPI_SOURCE == 3 && st.MPI_TAG == 44 && st.MPI_ERROR == MPI_ERR_TAG);
    MPI_OK(MPI_Status_get_source(&st, &v));
    CHECK(v == 3);
    MPI_OK(MPI_Status_get_tag(&st, &v));
    CHECK(v == 44);
    MPI_OK(MPI_Status_get_error(&st, &v));
    CHECK(v == MPI_ERR_TAG);
#endif

    /* Errors (on MPI_COMM_SELF by the MPI-4 rule; MPICH 4.0 uses WORLD's). */
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    EXPECT_CLASS(MPI_Status_set_elements(&st, MPI_INT, -1), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Get_count(&st, MPI_DATATYPE_NULL, &cnt), MPI_ERR_TYPE);

    t_done("status");
    return 0;
}
