/* Linked against libmadmpi and run by tests/tests/abi_header.rs: the functions that need no
 * MPI_Init (conversions, address arithmetic, the variadic MPI_Pcontrol, MPI_Wtime) called through
 * the real symbols, with the C calling convention a program uses. */

#include <mpi.h>
#include <stdio.h>

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                  \
        }                                                                \
    } while (0)

int main(void)
{
    int failures = 0;
    MPI_Status status = { 3, 7, 0, { 1, 2, 3, 4, 5 } };
    MPI_Status back;
    MPI_Fint f[MPI_F_STATUS_SIZE];

    CHECK(MPI_Comm_c2f(MPI_COMM_WORLD) == 0x101);
    CHECK(PMPI_Comm_c2f(MPI_COMM_SELF) == 0x102);
    CHECK(MPI_Type_f2c(0x209) == MPI_INT);
    CHECK(MPI_Op_fromint(MPI_Op_toint(MPI_SUM)) == MPI_SUM);
    CHECK(MPI_Aint_add((MPI_Aint)100, (MPI_Aint)-8) == 92);
    CHECK(MPI_Aint_diff((MPI_Aint)100, (MPI_Aint)8) == 92);
    CHECK(MPI_Status_c2f(&status, f) == MPI_SUCCESS);
    CHECK(f[MPI_F_SOURCE] == 3 && f[MPI_F_TAG] == 7 && f[MPI_F_ERROR] == 0);
    CHECK(MPI_Status_f2c(f, &back) == MPI_SUCCESS);
    CHECK(back.MPI_SOURCE == 3 && back.MPI_TAG == 7 && back.MPI_internal[4] == 5);
    CHECK(MPI_Pcontrol(0) == MPI_SUCCESS);
    CHECK(MPI_Pcontrol(2, "phase", 1.5, 42L) == MPI_SUCCESS);
    CHECK(PMPI_Pcontrol(1) == MPI_SUCCESS);
    CHECK(MPI_Wtime() >= 0.0 && MPI_Wtick() > 0.0);
    if (failures == 0) {
        printf("ok\n");
    }
    return failures != 0;
}
