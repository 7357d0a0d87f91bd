/* rdmadyn.c - dynamic windows (MPI_Win_create_dynamic, MPI_Win_attach/detach) checked byte
 * for byte, written for the RDMA path of the ofi transport (each attached region registered,
 * its key asked for by origins on first access) and passing on the message path as well.
 * Every rank works on its right neighbour; three rounds:
 *  0. region A attached;
 *  1. A detached then attached again at the same address (a new registration: an origin
 *     that kept the old key would fail);
 *  2. A detached, then B and A attached (two regions; operations on both).
 * Each round: the addresses exchanged by MPI_Allgather (the synchronisation after attach),
 * then under lock_all: a put (first access: messages, and the key asked for), a flush, a
 * second put and a get of it (RDMA once the key is known), unlock_all; then under an
 * exclusive lock a get of the first put; then fence epochs with a put and a get. The target
 * checks its memory after a barrier. At least 2 ranks. */
#include "../p2p/common.h"

#define LEN (1u << 20)
#define REGION (4u << 20)

/* Puts and gets of round `round` into the right neighbour's region at `raddr` (this rank's
 * own region is `mine`); `tag` names the region in the patterns. */
static void round_on(MPI_Win win, unsigned char *mine, MPI_Aint raddr, unsigned round,
                     unsigned tag, const char *what)
{
    int me = t_rank, n = t_size, right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *src = xmalloc(LEN), *back = xmalloc(LEN);
    unsigned k = round * 10 + tag;
    memset(mine, 0, REGION);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    MPI_OK(MPI_Win_lock_all(0, win));
    fill(src, LEN, (unsigned)me, k);
    MPI_OK(MPI_Put(src, LEN, MPI_BYTE, right, raddr + 8, LEN, MPI_BYTE, win));
    MPI_OK(MPI_Win_flush(right, win));
    fill(src, LEN, (unsigned)me, k + 1);
    MPI_OK(MPI_Put(src, LEN, MPI_BYTE, right, raddr + LEN + 64, LEN, MPI_BYTE, win));
    MPI_OK(MPI_Win_flush(right, win));
    memset(back, 0, LEN);
    MPI_OK(MPI_Get(back, LEN, MPI_BYTE, right, raddr + LEN + 64, LEN, MPI_BYTE, win));
    MPI_OK(MPI_Win_unlock_all(win));
    long bad = verify(back, LEN, (unsigned)me, k + 1);
    CHECKF(bad < 0, "%s round %u: lock_all get: byte %ld wrong", what, round, bad);

    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    memset(back, 0, LEN);
    MPI_OK(MPI_Get(back, LEN, MPI_BYTE, right, raddr + 8, LEN, MPI_BYTE, win));
    MPI_OK(MPI_Win_unlock(right, win));
    bad = verify(back, LEN, (unsigned)me, k);
    CHECKF(bad < 0, "%s round %u: lock get: byte %ld wrong", what, round, bad);

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    bad = verify(mine + 8, LEN, (unsigned)left, k);
    CHECKF(bad < 0, "%s round %u: first put from %d: byte %ld wrong", what, round, left, bad);
    bad = verify(mine + LEN + 64, LEN, (unsigned)left, k + 1);
    CHECKF(bad < 0, "%s round %u: second put from %d: byte %ld wrong", what, round, left, bad);
    CHECKF(mine[7] == 0 && mine[LEN + 8] == 0 && mine[2 * LEN + 64] == 0,
           "%s round %u: a put wrote outside", what, round);

    /* Fence epochs: a put, then a get of it. */
    fill(src, LEN, (unsigned)me, k + 2);
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(src, LEN, MPI_BYTE, right, raddr + 3 * LEN, LEN, MPI_BYTE, win));
    MPI_OK(MPI_Win_fence(0, win));
    bad = verify(mine + 3 * LEN, LEN, (unsigned)left, k + 2);
    CHECKF(bad < 0, "%s round %u: fence put from %d: byte %ld wrong", what, round, left, bad);
    memset(back, 0, LEN);
    MPI_OK(MPI_Get(back, LEN, MPI_BYTE, right, raddr + 3 * LEN, LEN, MPI_BYTE, win));
    MPI_OK(MPI_Win_fence(0, win));
    bad = verify(back, LEN, (unsigned)me, k + 2);
    CHECKF(bad < 0, "%s round %u: fence get: byte %ld wrong", what, round, bad);
    free(src);
    free(back);
}

/* The right neighbour's address of this rank's region `mine` (exchanged by everyone). */
static MPI_Aint right_addr(unsigned char *mine)
{
    MPI_Aint a, *all = xmalloc(sizeof(MPI_Aint) * (size_t)t_size);
    MPI_OK(MPI_Get_address(mine, &a));
    MPI_OK(MPI_Allgather(&a, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD));
    a = all[(t_rank + 1) % t_size];
    free(all);
    return a;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size < 2) {
        t_done("rdmadyn");
        return 0;
    }
    MPI_Win win;
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    unsigned char *a = xmalloc(REGION), *b = xmalloc(REGION);

    MPI_OK(MPI_Win_attach(win, a, REGION));
    round_on(win, a, right_addr(a), 0, 0, "A");

    MPI_OK(MPI_Win_detach(win, a));
    MPI_OK(MPI_Win_attach(win, a, REGION));
    round_on(win, a, right_addr(a), 1, 0, "A again");

    MPI_OK(MPI_Win_detach(win, a));
    MPI_OK(MPI_Win_attach(win, b, REGION));
    MPI_OK(MPI_Win_attach(win, a, REGION));
    MPI_Aint rb = right_addr(b), ra = right_addr(a);
    round_on(win, b, rb, 2, 1, "B");
    round_on(win, a, ra, 2, 2, "A with B");

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_detach(win, a));
    MPI_OK(MPI_Win_detach(win, b));
    MPI_OK(MPI_Win_free(&win));
    free(a);
    free(b);
    t_done("rdmadyn");
    return 0;
}
