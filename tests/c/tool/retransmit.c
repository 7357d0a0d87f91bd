/* retransmit.c - the performance variables of the emulated BCL-3 link (run with
 * MADMPI_TRANSPORTS=emu MADMPI_EMU=bcl3 and a lossy wire, MADMPI_EMU_LOSS): rank 0 sends 200
 * messages of 64 KiB to rank 1; the job's frames sent again (madmpi_emu_retransmitted) must
 * be more than none, and rank 0's emu packets at least one per message.
 */
#include "../p2p/common.h"

/* A started handle of counter `name`, counting from 0. */
static MPI_T_pvar_handle counter(MPI_T_pvar_session s, const char *name)
{
    int idx, count;
    MPI_T_pvar_handle h;
    CHECK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &count) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_start(s, h) == MPI_SUCCESS);
    return h;
}

int main(int argc, char **argv)
{
    static char buf[65536];
    int prov, i;
    unsigned long long rt = 0, pk = 0, total = 0;
    MPI_T_pvar_session s;
    MPI_T_pvar_handle hrt, hpk;

    CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &prov) == MPI_SUCCESS);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    CHECK(MPI_T_pvar_session_create(&s) == MPI_SUCCESS);
    hrt = counter(s, "madmpi_emu_retransmitted");
    hpk = counter(s, "madmpi_emu_packets_sent");
    for (i = 0; i < 200; i++) {
        if (t_rank == 0)
            MPI_OK(MPI_Send(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD));
        else if (t_rank == 1)
            MPI_OK(MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(MPI_T_pvar_read(s, hrt, &rt) == MPI_SUCCESS);
    CHECK(MPI_T_pvar_read(s, hpk, &pk) == MPI_SUCCESS);
    if (t_rank == 0)
        CHECKF(pk >= 200, "emu packets %llu", pk);
    MPI_OK(MPI_Reduce(&rt, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (t_rank == 0)
        CHECKF(total > 0, "no retransmission on a lossy wire");
    CHECK(MPI_T_pvar_session_free(&s) == MPI_SUCCESS);
    MPI_Finalize();
    CHECK(MPI_T_finalize() == MPI_SUCCESS);
    if (t_rank == 0)
        printf("%llu frames sent again\nOK retransmit\n", total);
    return 0;
}
