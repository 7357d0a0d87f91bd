/* sendmodes.c - every send mode (standard, synchronous, ready, buffered;
 * blocking and non-blocking; int and MPI_Count variants) with sizes from 0
 * bytes to 4 MiB, across the eager/rendezvous threshold, in both directions
 * between rank pairs (0,1), (2,3).  With an odd number of ranks the last one
 * only takes part in the final barrier. */
#include "common.h"

enum {
    M_SEND,
    M_SSEND,
    M_RSEND,
    M_BSEND,
    M_ISEND,
    M_ISSEND,
    M_IRSEND,
    M_IBSEND,
    M_SEND_C,
    M_SSEND_C,
    M_ISEND_C,
    M_IBSEND_C,
    NMODES
};
static const char *mode_name[NMODES] = {"Send",   "Ssend",   "Rsend",   "Bsend",
                                        "Isend",  "Issend",  "Irsend",  "Ibsend",
                                        "Send_c", "Ssend_c", "Isend_c", "Ibsend_c"};

#define TAG_DATA 11
#define TAG_GO 12

static int is_ready(int m) { return m == M_RSEND || m == M_IRSEND; }

static void do_send(int m, const void *buf, size_t n, int dest)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int cnt = (int)n;
    MPI_Count c = (MPI_Count)n;
    switch (m) {
    case M_SEND: MPI_OK(MPI_Send(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD)); break;
    case M_SSEND: MPI_OK(MPI_Ssend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD)); break;
    case M_RSEND: MPI_OK(MPI_Rsend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD)); break;
    case M_BSEND: MPI_OK(MPI_Bsend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD)); break;
    case M_ISEND: MPI_OK(MPI_Isend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD, &r)); break;
    case M_ISSEND: MPI_OK(MPI_Issend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD, &r)); break;
    case M_IRSEND: MPI_OK(MPI_Irsend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD, &r)); break;
    case M_IBSEND: MPI_OK(MPI_Ibsend(buf, cnt, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD, &r)); break;
    case M_SEND_C: MPI_OK(MPI_Send_c(buf, c, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD)); break;
    case M_SSEND_C: MPI_OK(MPI_Ssend_c(buf, c, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD)); break;
    case M_ISEND_C: MPI_OK(MPI_Isend_c(buf, c, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD, &r)); break;
    case M_IBSEND_C: MPI_OK(MPI_Ibsend_c(buf, c, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD, &r)); break;
    default: FAILF("bad mode %d", m);
    }
    if (r != MPI_REQUEST_NULL) {
        MPI_Status st;
        MPI_OK(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL);
    }
}

/* One message from `sender` to `receiver` with mode m. */
static void xfer(int m, int sender, int receiver, unsigned char *buf, size_t n, unsigned id)
{
    if (t_rank == sender) {
        fill(buf, n, id, (unsigned)m);
        if (is_ready(m))
            MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, receiver, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        do_send(m, buf, n, receiver);
    } else if (t_rank == receiver) {
        MPI_Request r;
        MPI_Status st;
        memset(buf, 0, n);
        if (m >= M_SEND_C) {
            MPI_OK(MPI_Irecv_c(buf, (MPI_Count)n, MPI_BYTE, sender, TAG_DATA, MPI_COMM_WORLD, &r));
        } else {
            MPI_OK(MPI_Irecv(buf, (int)n, MPI_BYTE, sender, TAG_DATA, MPI_COMM_WORLD, &r));
        }
        if (is_ready(m))
            MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, sender, TAG_GO, MPI_COMM_WORLD));
        st.MPI_ERROR = -77;
        MPI_OK(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL);
        CHECK(st.MPI_SOURCE == sender && st.MPI_TAG == TAG_DATA);
        int cnt = -1;
        MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
        CHECKF((size_t)cnt == n, "mode %s: count %d, expected %zu", mode_name[m], cnt, n);
        MPI_Count cc = -1;
        MPI_OK(MPI_Get_count_c(&st, MPI_BYTE, &cc));
        CHECK((size_t)cc == n);
        long bad = verify(buf, n, id, (unsigned)m);
        CHECKF(bad < 0, "mode %s size %zu: byte %ld wrong", mode_name[m], n, bad);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    static const size_t sizes[] = {0, 1, 8, 100, 1024, 4096, 8192, 16384, 65536,
                                   65537, 262144, 1 << 20, 4 << 20};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    const size_t maxn = 4 << 20;
    unsigned char *buf = xmalloc(maxn);

    /* Room for two messages in flight: the previous buffered message may not
     * have been handed off yet when the next one starts. */
    int bsize = 2 * (int)maxn + 8 * MPI_BSEND_OVERHEAD;
    void *battach = xmalloc((size_t)bsize);
    MPI_OK(MPI_Buffer_attach(battach, bsize));

    int partner = t_rank ^ 1;
    if (partner >= t_size)
        partner = -1;
    unsigned id = 0;
    for (size_t s = 0; s < nsizes; s++) {
        for (int m = 0; m < NMODES; m++) {
            id++;
            if (partner < 0)
                continue;
            int lo = t_rank < partner ? t_rank : partner;
            int hi = lo + 1;
            xfer(m, lo, hi, buf, sizes[s], id);
            xfer(m, hi, lo, buf, sizes[s], id + 1000);
        }
    }

    void *det = NULL;
    int dsize = -1;
    MPI_OK(MPI_Buffer_detach(&det, &dsize));
    CHECK(det == battach && dsize == bsize);
    free(battach);
    free(buf);
    t_done("sendmodes");
    return 0;
}
