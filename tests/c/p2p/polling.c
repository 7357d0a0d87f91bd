/* polling.c - waiting by polling in the application: ring broadcasts
 * (HPL's panel broadcast pattern) whose ranks wait for their part by calling
 * MPI_Iprobe, MPI_Improbe, MPI_Test, MPI_Testany, MPI_Testsome,
 * MPI_Testall or MPI_Request_get_status in a loop, never a blocking call,
 * with small (eager) and large (rendezvous) messages, run with more ranks
 * than CPUs (the harness sets MADMPI_HOST_CPUS=1): after a few fruitless
 * polls every further one yields the CPU, and each call must still report
 * exactly what is there.  Also checks that fruitless polls report nothing:
 * an Iprobe for a tag never sent, a Test of a receive never matched.
 * 2..4 ranks. */
#include "common.h"

#define TAG 21
#define ROUNDS 24
#define WAYS 7

static int msg_ints(int round)
{
    static const int n[] = {1, 100, 3000, 70000};
    return n[round % 4];
}

static void fill_round(int *p, int n, int root, int round)
{
    for (int i = 0; i < n; i++)
        p[i] = root * 1000003 + round * 7919 + i;
}

/* Receive broadcast `round` from `left` into buf, waiting the way `way`
 * says, polling only. */
static void poll_recv(int *buf, int n, int left, int way)
{
    int flag = 0, idx = -1, outcount = 0, indices[1];
    MPI_Status st;
    MPI_Request r = MPI_REQUEST_NULL;
    long polls = 0;
    if (way == 0) {
        while (!flag) {
            MPI_OK(MPI_Iprobe(left, TAG, MPI_COMM_WORLD, &flag, &st));
            polls++;
        }
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == TAG);
        int cnt = -1;
        MPI_OK(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECKF(cnt == n, "Iprobe count %d, sent %d", cnt, n);
        MPI_OK(MPI_Recv(buf, n, MPI_INT, left, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        return;
    }
    if (way == 1) {
        MPI_Message m = MPI_MESSAGE_NULL;
        while (!flag) {
            MPI_OK(MPI_Improbe(left, TAG, MPI_COMM_WORLD, &flag, &m, &st));
            if (!flag)
                CHECK(m == MPI_MESSAGE_NULL);
        }
        CHECK(m != MPI_MESSAGE_NULL && st.MPI_SOURCE == left);
        MPI_OK(MPI_Mrecv(buf, n, MPI_INT, &m, MPI_STATUS_IGNORE));
        return;
    }
    MPI_OK(MPI_Irecv(buf, n, MPI_INT, left, TAG, MPI_COMM_WORLD, &r));
    switch (way) {
    case 2:
        while (!flag)
            MPI_OK(MPI_Test(&r, &flag, &st));
        CHECK(r == MPI_REQUEST_NULL);
        break;
    case 3:
        while (!flag) {
            MPI_OK(MPI_Testany(1, &r, &idx, &flag, &st));
            if (!flag)
                CHECK(idx == MPI_UNDEFINED);
        }
        CHECK(idx == 0 && r == MPI_REQUEST_NULL);
        break;
    case 4:
        while (outcount == 0) {
            MPI_OK(MPI_Testsome(1, &r, &outcount, indices, &st));
            CHECK(outcount == 0 || outcount == 1);
        }
        CHECK(indices[0] == 0 && r == MPI_REQUEST_NULL);
        break;
    case 5:
        while (!flag)
            MPI_OK(MPI_Testall(1, &r, &flag, &st));
        CHECK(r == MPI_REQUEST_NULL);
        break;
    default:
        while (!flag)
            MPI_OK(MPI_Request_get_status(r, &flag, &st));
        CHECK(r != MPI_REQUEST_NULL);
        MPI_OK(MPI_Wait(&r, &st));
        break;
    }
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == TAG);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size >= 2);
    int n = t_size;
    int left = (t_rank + n - 1) % n, right = (t_rank + 1) % n;
    int *buf = malloc(sizeof(int) * 70000);
    int *want = malloc(sizeof(int) * 70000);
    CHECK(buf && want);

    for (int way = 0; way < WAYS; way++) {
        for (int round = 0; round < ROUNDS; round++) {
            int root = round % n, cnt = msg_ints(round);
            fill_round(want, cnt, root, round);
            if (t_rank == root)
                memcpy(buf, want, sizeof(int) * (size_t)cnt);
            else {
                memset(buf, 0, sizeof(int) * (size_t)cnt);
                poll_recv(buf, cnt, left, way);
                for (int i = 0; i < cnt; i++)
                    CHECKF(buf[i] == want[i], "way %d round %d: element %d", way, round, i);
            }
            if (right != root)
                MPI_OK(MPI_Send(buf, cnt, MPI_INT, right, TAG, MPI_COMM_WORLD));
        }
    }

    /* Fruitless polls, many in a row (each further one yields): they find
     * nothing, and a message sent afterwards is still found. */
    int flag = 1;
    MPI_Status st;
    for (int i = 0; i < 200; i++) {
        MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, TAG + 1, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag);
    }
    MPI_Request r;
    int v = -1;
    MPI_OK(MPI_Irecv(&v, 1, MPI_INT, left, TAG + 2, MPI_COMM_WORLD, &r));
    for (int i = 0; i < 200; i++) {
        MPI_OK(MPI_Test(&r, &flag, &st));
        CHECK(!flag);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Send(&t_rank, 1, MPI_INT, right, TAG + 2, MPI_COMM_WORLD));
    flag = 0;
    while (!flag)
        MPI_OK(MPI_Test(&r, &flag, &st));
    CHECK(v == left);

    free(buf);
    free(want);
    t_done("polling");
    return 0;
}
