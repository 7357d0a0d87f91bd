/* probe.c - Probe / Iprobe / Mprobe / Improbe / Mrecv / Imrecv with sizes
 * the receiver does not know (small and rendezvous), Get_count and
 * Get_elements on probed statuses, probes on MPI_PROC_NULL
 * (MPI_MESSAGE_NO_PROC), and a message matched by Mprobe that no other
 * receive can take.  2..4 ranks: every rank > 0 sends to rank 0. */
#include "common.h"

#define ROUNDS 12

static int msg_ints(int src, int round)
{
    /* from 0 to ~300k ints: eager and rendezvous */
    static const int base[] = {0, 1, 7, 100, 1000, 5000, 20000, 80000, 300000};
    return base[(src * 5 + round) % 9] + src;
}

static void fill_ints(int *p, int n, int src, int round)
{
    for (int i = 0; i < n; i++)
        p[i] = src * 1000003 + round * 7919 + i;
}

static void check_ints(const int *p, int n, int src, int round)
{
    for (int i = 0; i < n; i++)
        CHECKF(p[i] == src * 1000003 + round * 7919 + i, "from %d round %d: element %d", src, round, i);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size >= 2);
    MPI_Status st;
    int cnt, flag;

    if (t_rank == 0) {
        int total = (t_size - 1) * ROUNDS;
        int next[64] = {0};
        for (int k = 0; k < total; k++) {
            int way = k % 4;
            MPI_Message m = MPI_MESSAGE_NULL;
            /* Find out who sent what, and how much. */
            if (way == 0) {
                MPI_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            } else if (way == 1) {
                flag = 0;
                while (!flag)
                    MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            } else if (way == 2) {
                MPI_OK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st));
                CHECK(m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC);
            } else {
                flag = 0;
                while (!flag)
                    MPI_OK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
                CHECK(m != MPI_MESSAGE_NULL);
            }
            int src = st.MPI_SOURCE, round = st.MPI_TAG;
            CHECK(src >= 1 && src < t_size);
            CHECKF(round == next[src], "from %d: round %d, expected %d", src, round, next[src]);
            next[src]++;
            MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
            CHECKF(cnt == msg_ints(src, round), "probe count %d, expected %d", cnt, msg_ints(src, round));
            int el = -1;
            MPI_OK(MPI_Get_elements(&st, MPI_INT, &el));
            CHECK(el == cnt);
            MPI_Count cc = -1;
            MPI_OK(MPI_Get_elements_x(&st, MPI_INT, &cc));
            CHECK(cc == cnt);
            MPI_OK(MPI_Get_count(&st, MPI_BYTE, &el));
            CHECK(el == 4 * cnt);
            if (cnt % 2 == 1) {
                MPI_OK(MPI_Get_count(&st, MPI_DOUBLE, &el));
                CHECK(el == MPI_UNDEFINED);
            }
            int *buf = xmalloc((size_t)cnt * sizeof(int));
            MPI_Status rs;
            if (way < 2) {
                MPI_OK(MPI_Recv(buf, cnt, MPI_INT, src, round, MPI_COMM_WORLD, &rs));
            } else if (k % 8 < 4) {
                MPI_OK(MPI_Mrecv(buf, cnt, MPI_INT, &m, &rs));
                CHECK(m == MPI_MESSAGE_NULL);
            } else {
                MPI_Request r;
                MPI_OK(MPI_Imrecv(buf, cnt, MPI_INT, &m, &r));
                CHECK(m == MPI_MESSAGE_NULL);
                MPI_OK(MPI_Wait(&r, &rs));
            }
            CHECK(rs.MPI_SOURCE == src && rs.MPI_TAG == round);
            MPI_OK(MPI_Get_count(&rs, MPI_INT, &el));
            CHECK(el == cnt);
            check_ints(buf, cnt, src, round);
            free(buf);
        }
    } else {
        for (int round = 0; round < ROUNDS; round++) {
            int n = msg_ints(t_rank, round);
            int *buf = xmalloc((size_t)n * sizeof(int));
            fill_ints(buf, n, t_rank, round);
            MPI_OK(MPI_Send(buf, n, MPI_INT, 0, round, MPI_COMM_WORLD));
            free(buf);
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* A message taken by Mprobe is invisible to other probes and receives. */
    if (t_rank == 1) {
        int a = 11, b = 22;
        MPI_OK(MPI_Send(&a, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
        MPI_OK(MPI_Send(&b, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
    } else if (t_rank == 0) {
        MPI_Message m1, m2;
        MPI_OK(MPI_Mprobe(1, 5, MPI_COMM_WORLD, &m1, &st));
        MPI_OK(MPI_Mprobe(1, 5, MPI_COMM_WORLD, &m2, &st));
        MPI_OK(MPI_Iprobe(1, 5, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 0);
        int a = 0, b = 0;
        MPI_OK(MPI_Mrecv(&b, 1, MPI_INT, &m2, &st));
        MPI_OK(MPI_Mrecv(&a, 1, MPI_INT, &m1, &st));
        CHECK(a == 11 && b == 22);
    }

    /* Probes on MPI_PROC_NULL. */
    {
        st.MPI_SOURCE = 12345;
        MPI_OK(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == 0);
        flag = 0;
        MPI_OK(MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 1 && st.MPI_SOURCE == MPI_PROC_NULL);
        MPI_Message m;
        MPI_OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
        CHECK(m == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL);
        int v = 3;
        MPI_OK(MPI_Mrecv(&v, 1, MPI_INT, &m, &st));
        CHECK(m == MPI_MESSAGE_NULL && v == 3 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
        MPI_OK(MPI_Improbe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &m, &st));
        CHECK(flag == 1 && m == MPI_MESSAGE_NO_PROC);
        MPI_Request r;
        MPI_OK(MPI_Imrecv(&v, 1, MPI_INT, &m, &r));
        MPI_OK(MPI_Wait(&r, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
    }

    t_done("probe");
    return 0;
}
