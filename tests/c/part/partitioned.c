/* partitioned.c - partitioned communication (MPI_Psend_init, MPI_Precv_init, MPI_Pready*,
 * MPI_Parrived) on 2 to 4 ranks: each rank sends to the next one of a ring and receives from
 * the previous one.  Byte checks of every partition; partitions made ready out of order and
 * across several rounds; different partition counts on each side; a partition reported by
 * MPI_Parrived before the others are even ready; large partitions (rendezvous); a
 * non-contiguous receive type; empty partitions; ordinary messages with the same tag on the same communicator;
 * MPI_Startall, MPI_Testall, MPI_Waitany; MPI_PROC_NULL; and the error classes of bad use.
 */
#include "../p2p/common.h"

static int next_r, prev_r;

/* The value of int i of round k of the message from rank `from`. */
static int val(int from, int k, long i)
{
    return (int)(from * 1000003L + k * 7919L + i * 31L + 1);
}

/* Same partition counts, ints, partitions ready in a scrambled order; three rounds. An
 * ordinary message with the same tag travels beside each round. */
static void same_counts(void)
{
    enum { P = 8, C = 100 };
    int *sb = xmalloc(sizeof(int) * P * C), *rb = xmalloc(sizeof(int) * P * C);
    MPI_Request rq[2];
    MPI_OK(MPI_Psend_init(sb, P, C, MPI_INT, next_r, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    MPI_OK(MPI_Precv_init(rb, P, C, MPI_INT, prev_r, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    for (int k = 0; k < 3; k++) {
        for (long i = 0; i < P * C; i++)
            sb[i] = val(t_rank, k, i);
        memset(rb, 0, sizeof(int) * P * C);
        MPI_OK(MPI_Startall(2, rq));
        int plain = 1000 + t_rank + k, got = -1;
        MPI_Request pr;
        MPI_OK(MPI_Isend(&plain, 1, MPI_INT, next_r, 5, MPI_COMM_WORLD, &pr));
        for (int j = 0; j < P; j++) {
            int p = (j * 5 + k) % P; /* 5 is prime to 8: a permutation */
            MPI_OK(MPI_Pready(p, rq[0]));
        }
        MPI_OK(MPI_Recv(&got, 1, MPI_INT, prev_r, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECKF(got == 1000 + prev_r + k, "plain message %d, want %d", got, 1000 + prev_r + k);
        MPI_OK(MPI_Wait(&pr, MPI_STATUS_IGNORE));
        MPI_Status st[2];
        MPI_OK(MPI_Waitall(2, rq, st));
        int n = -1;
        MPI_OK(MPI_Get_count(&st[1], MPI_INT, &n));
        CHECKF(n == P * C, "count %d", n);
        CHECK(st[1].MPI_SOURCE == prev_r && st[1].MPI_TAG == 5);
        for (long i = 0; i < P * C; i++)
            CHECKF(rb[i] == val(prev_r, k, i), "round %d int %ld: %d", k, i, rb[i]);
        for (int p = 0; p < P; p++) {
            int flag = 0;
            MPI_OK(MPI_Parrived(rq[1], p, &flag));
            CHECK(flag); /* inactive: everything arrived */
        }
    }
    MPI_OK(MPI_Request_free(&rq[0]));
    MPI_OK(MPI_Request_free(&rq[1]));
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL);
    free(sb);
    free(rb);
}

/* Empty partitions (count 0): each still arrives only once the sender made its counterpart
 * ready: MPI_Parrived is false after the receive starts, true after the matching Pready (the
 * ring's barrier orders them); with 3 receive partitions against 2 send partitions, receive
 * partition 1 needs both send partitions. */
static void empty_partitions(void)
{
    int sb = 0, rb = 0, flag = 1;
    MPI_Request rq[2];
    MPI_OK(MPI_Psend_init(&sb, 2, 0, MPI_INT, next_r, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    MPI_OK(MPI_Precv_init(&rb, 3, 0, MPI_INT, prev_r, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    for (int k = 0; k < 2; k++) {
        MPI_OK(MPI_Start(&rq[1]));
        for (int i = 0; i < 3; i++) {
            MPI_OK(MPI_Parrived(rq[1], i, &flag));
            CHECKF(!flag, "round %d: empty partition %d arrived before its sender started", k, i);
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Start(&rq[0]));
        MPI_OK(MPI_Pready(0, rq[0]));
        /* Receive partition 0 follows send partition 0; partition 1 also needs send 1. */
        do
            MPI_OK(MPI_Parrived(rq[1], 0, &flag));
        while (!flag);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Parrived(rq[1], 1, &flag));
        CHECKF(!flag, "round %d: empty partition 1 arrived before send partition 1 was ready", k);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Pready(1, rq[0]));
        MPI_Status st[2];
        MPI_OK(MPI_Waitall(2, rq, st));
        int n = -1;
        MPI_OK(MPI_Get_count(&st[1], MPI_INT, &n));
        CHECKF(n == 0, "count %d", n);
    }
    MPI_OK(MPI_Request_free(&rq[0]));
    MPI_OK(MPI_Request_free(&rq[1]));
}

/* The sender cuts the buffer in 8 partitions of 6 ints, the receiver in 12 of 4. The sender
 * makes partition 0 ready alone and waits for an ordinary acknowledgement, which the receiver
 * sends only once MPI_Parrived reports its partitions 0 (bytes 0..16) arrived and checked: a
 * partition travels when it is ready, not with the last one. */
static void different_counts(void)
{
    enum { SP = 8, SC = 6, RP = 12, RC = 4 };
    int sb[SP * SC], rb[RP * RC];
    MPI_Request s, r;
    for (int i = 0; i < SP * SC; i++)
        sb[i] = val(t_rank, 9, i);
    memset(rb, 0, sizeof rb);
    MPI_OK(MPI_Psend_init(sb, SP, SC, MPI_INT, next_r, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    MPI_OK(MPI_Precv_init(rb, RP, RC, MPI_INT, prev_r, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    MPI_OK(MPI_Start(&r));
    MPI_OK(MPI_Start(&s));
    MPI_OK(MPI_Pready(0, s));
    /* Receiver side: partition 0 (ints 0..3) lies in sender partition 0. */
    int flag = 0;
    while (!flag)
        MPI_OK(MPI_Parrived(r, 0, &flag));
    for (int i = 0; i < RC; i++)
        CHECKF(rb[i] == val(prev_r, 9, i), "early int %d", i);
    /* Receive partition 2 (ints 8..11) needs sender partitions 1 and 2: not ready yet. */
    MPI_OK(MPI_Parrived(r, 2, &flag));
    CHECK(!flag);
    int ack = 1;
    MPI_OK(MPI_Send(&ack, 1, MPI_INT, prev_r, 7, MPI_COMM_WORLD));
    MPI_OK(MPI_Recv(&ack, 1, MPI_INT, next_r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Pready_range(1, SP - 1, s));
    for (int p = RP - 1; p >= 0; p--) {
        flag = 0;
        while (!flag)
            MPI_OK(MPI_Parrived(r, p, &flag));
        for (int i = p * RC; i < (p + 1) * RC; i++)
            CHECKF(rb[i] == val(prev_r, 9, i), "partition %d int %d", p, i);
    }
    int done = 0;
    while (!done)
        MPI_OK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Request_free(&s));
    MPI_OK(MPI_Request_free(&r));
}

/* Large partitions (each a rendezvous), made ready with MPI_Pready_list in reverse, received
 * in 2 partitions; a vector receive type (every other double, the gaps left untouched). */
static void large_and_strided(void)
{
    enum { SP = 4, SC = 40000, RP = 2 };
    long n = (long)SP * SC;
    double *sb = xmalloc(sizeof(double) * n);
    double *rb = xmalloc(sizeof(double) * 2 * n);
    for (long i = 0; i < n; i++)
        sb[i] = (double)val(t_rank, 3, i);
    for (long i = 0; i < 2 * n; i++)
        rb[i] = -1.0;
    MPI_Datatype every_other;
    MPI_OK(MPI_Type_vector((int)(n / RP), 1, 2, MPI_DOUBLE, &every_other));
    MPI_OK(MPI_Type_create_resized(every_other, 0, (MPI_Aint)(sizeof(double) * n), &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    MPI_Request rq[2];
    MPI_OK(MPI_Precv_init(rb, RP, 1, every_other, prev_r, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    MPI_OK(MPI_Psend_init(sb, SP, SC, MPI_DOUBLE, next_r, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    for (int k = 0; k < 2; k++) {
        MPI_OK(MPI_Startall(2, rq));
        int list[SP];
        for (int i = 0; i < SP; i++)
            list[i] = SP - 1 - i;
        MPI_OK(MPI_Pready_list(SP, list, rq[0]));
        int idx = -1, left = 2;
        while (left > 0) {
            MPI_OK(MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE));
            CHECK(idx == 0 || idx == 1);
            left--;
        }
        MPI_OK(MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE));
        CHECK(idx == MPI_UNDEFINED);
        for (long i = 0; i < n; i++) {
            CHECKF(rb[2 * i] == (double)val(prev_r, 3, i), "double %ld", i);
            CHECKF(rb[2 * i + 1] == -1.0, "gap %ld written", i);
        }
    }
    MPI_OK(MPI_Request_free(&rq[0]));
    MPI_OK(MPI_Request_free(&rq[1]));
    MPI_OK(MPI_Type_free(&every_other));
    free(sb);
    free(rb);
}

/* MPI_PROC_NULL peers: complete once started (a send once all partitions are ready). */
static void proc_null(void)
{
    int b[4] = {1, 2, 3, 4};
    MPI_Request s, r;
    MPI_OK(MPI_Psend_init(b, 2, 2, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    MPI_OK(MPI_Precv_init(b, 2, 2, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    MPI_OK(MPI_Start(&s));
    MPI_OK(MPI_Start(&r));
    MPI_Status st;
    MPI_OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
    MPI_OK(MPI_Pready_range(0, 1, s));
    MPI_OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK(b[0] == 1 && b[3] == 4);
    MPI_OK(MPI_Request_free(&s));
    MPI_OK(MPI_Request_free(&r));
}

/* Bad use returns the standard's error classes (MPI_ERRORS_RETURN on a duplicate). */
static void errors(void)
{
    MPI_Comm c;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPI_OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    int sb[8], rb[8];
    for (int i = 0; i < 8; i++)
        sb[i] = val(t_rank, 1, i);
    MPI_Request s, r;
    MPI_OK(MPI_Psend_init(sb, 4, 2, MPI_INT, next_r, 1, c, MPI_INFO_NULL, &s));
    MPI_OK(MPI_Precv_init(rb, 2, 4, MPI_INT, prev_r, 1, c, MPI_INFO_NULL, &r));
    EXPECT_CLASS(MPI_Pready(0, s), MPI_ERR_REQUEST); /* inactive */
    MPI_OK(MPI_Start(&s));
    MPI_OK(MPI_Start(&r));
    EXPECT_CLASS(MPI_Pready(4, s), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Pready(-1, s), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Pready(0, r), MPI_ERR_REQUEST); /* a receive */
    int flag;
    EXPECT_CLASS(MPI_Parrived(r, 2, &flag), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Parrived(s, 0, &flag), MPI_ERR_REQUEST);
    EXPECT_CLASS(MPI_Request_free(&s), MPI_ERR_REQUEST); /* active */
    EXPECT_CLASS(MPI_Psend_init(sb, 0, 2, MPI_INT, next_r, 1, c, MPI_INFO_NULL, &s), MPI_ERR_ARG);
    MPI_Request bad;
    EXPECT_CLASS(MPI_Precv_init(rb, 2, 4, MPI_INT, MPI_ANY_SOURCE, 1, c, MPI_INFO_NULL, &bad),
                 MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Precv_init(rb, 2, 4, MPI_INT, prev_r, MPI_ANY_TAG, c, MPI_INFO_NULL, &bad),
                 MPI_ERR_TAG);
    MPI_OK(MPI_Pready_range(0, 3, s));
    EXPECT_CLASS(MPI_Pready(1, s), MPI_ERR_ARG); /* twice in a round */
    MPI_OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 8; i++)
        CHECK(rb[i] == val(prev_r, 1, i));
    MPI_OK(MPI_Request_free(&s));
    MPI_OK(MPI_Request_free(&r));

    /* Total sizes that differ: the receive fails with MPI_ERR_TRUNCATE, the send completes. */
    int big[12];
    memset(big, 0, sizeof big);
    MPI_OK(MPI_Psend_init(big, 3, 4, MPI_INT, next_r, 2, c, MPI_INFO_NULL, &s));
    MPI_OK(MPI_Precv_init(rb, 2, 4, MPI_INT, prev_r, 2, c, MPI_INFO_NULL, &r));
    MPI_OK(MPI_Start(&s));
    MPI_OK(MPI_Start(&r));
    MPI_OK(MPI_Pready_range(0, 2, s));
    MPI_OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
    EXPECT_CLASS(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_ERR_TRUNCATE);
    MPI_OK(MPI_Request_free(&s));
    MPI_OK(MPI_Request_free(&r));
    MPI_OK(MPI_Comm_free(&c));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    next_r = (t_rank + 1) % t_size;
    prev_r = (t_rank + t_size - 1) % t_size;
    same_counts();
    different_counts();
    large_and_strided();
    empty_partitions();
    proc_null();
    errors();
    t_done("partitioned");
    return 0;
}
