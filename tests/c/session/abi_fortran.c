/* abi_fortran.c - the Fortran side of the standard ABI (MPI_Abi_set/get_fortran_info,
 * MPI_Abi_set/get_fortran_booleans, callable before MPI_Init, once each), the booleans used
 * by the logical reductions on MPI_LOGICAL, and MPI_Get_hw_resource_info with the
 * MPI_COMM_TYPE_HW_GUIDED split it describes.
 */
#include "../p2p/common.h"

int main(int argc, char **argv)
{
    MPI_Info info;
    int set = -1, t = 0, f = 0, flag = 0;
    char v[64];

    /* Before MPI_Init: nothing set yet. */
    MPI_OK(MPI_Abi_get_fortran_info(&info));
    CHECK(info == MPI_INFO_NULL);
    MPI_OK(MPI_Abi_get_fortran_booleans(4, &t, &f, &set));
    CHECK(set == 0);
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "mpi_logical_size", "4"));
    MPI_OK(MPI_Info_set(info, "mpi_integer_size", "4"));
    MPI_OK(MPI_Info_set(info, "mpi_real_size", "4"));
    MPI_OK(MPI_Info_set(info, "mpi_double_precision_size", "8"));
    MPI_OK(MPI_Info_set(info, "mpi_integer8_supported", "true"));
    MPI_OK(MPI_Abi_set_fortran_info(info));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Abi_get_fortran_info(&info));
    CHECK(info != MPI_INFO_NULL);
    MPI_OK(MPI_Info_get_string(info, "mpi_integer8_supported", &(int){sizeof v}, v, &flag));
    CHECK(flag && strcmp(v, "true") == 0);
    MPI_OK(MPI_Info_free(&info));
    int tv = -1, fv = 0;
    MPI_OK(MPI_Abi_set_fortran_booleans(4, &tv, &fv));
    MPI_OK(MPI_Abi_get_fortran_booleans(4, &t, &f, &set));
    CHECK(set == 1 && t == -1 && f == 0);

    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "mpi_logical_size", "4"));
    MPI_OK(MPI_Info_set(info, "mpi_integer_size", "4"));
    MPI_OK(MPI_Info_set(info, "mpi_real_size", "4"));
    MPI_OK(MPI_Info_set(info, "mpi_double_precision_size", "8"));
    EXPECT_CLASS(MPI_Abi_set_fortran_info(info), MPI_ERR_ABI); /* once */
    MPI_OK(MPI_Info_free(&info));
    EXPECT_CLASS(MPI_Abi_set_fortran_booleans(4, &tv, &fv), MPI_ERR_ABI); /* once */
    EXPECT_CLASS(MPI_Abi_get_fortran_booleans(8, &t, &f, &set), MPI_ERR_ABI); /* other size */
    EXPECT_CLASS(MPI_Abi_get_fortran_booleans(3, &t, &f, &set), MPI_ERR_ARG);

    /* Logical reductions read .FALSE. as false, anything else as true, and write the values
     * set (-1 for .TRUE. here, where C's rule would write 1). */
    int in[4] = {-1, 0, 7, t_rank == 0 ? -1 : 0}, land[4], lor[4];
    MPI_OK(MPI_Allreduce(in, land, 4, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD));
    MPI_OK(MPI_Allreduce(in, lor, 4, MPI_LOGICAL, MPI_LOR, MPI_COMM_WORLD));
    int one = t_size == 1; /* a reduction over one process returns its input */
    CHECK(land[0] == -1 && land[1] == 0 && land[2] == (one ? 7 : -1));
    CHECK(land[3] == (one ? -1 : 0));
    CHECK(lor[0] == -1 && lor[1] == 0 && lor[2] == (one ? 7 : -1) && lor[3] == -1);

    /* The hardware this process runs on, and the split it guides. */
    MPI_OK(MPI_Get_hw_resource_info(&info));
    MPI_OK(MPI_Info_get_string(info, "mpi_hw_resource_type", &(int){sizeof v}, v, &flag));
    CHECK(flag && strcmp(v, "mpi_shared_memory") == 0);
    MPI_OK(MPI_Info_get_string(info, "madmpi_cpus_available", &(int){sizeof v}, v, &flag));
    CHECK(flag && atoi(v) >= 1);
    MPI_Comm node, shared;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &node));
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared));
    int a = 0;
    MPI_OK(MPI_Comm_compare(node, shared, &a));
    CHECK(a == MPI_CONGRUENT);
    MPI_OK(MPI_Comm_free(&node));
    MPI_OK(MPI_Comm_free(&shared));
    MPI_OK(MPI_Info_free(&info));
    t_done("abi_fortran");
    return 0;
}
