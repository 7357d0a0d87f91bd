/* madeleine.c - the Madeleine API of include/madeleine.h on 2 or more ranks.
 *
 * Ranks pair up (0-1, 2-3, ...; an odd last rank only takes part in the any-source part):
 * the paper's RPC (a header unpacked EXPRESS gives the size of an array unpacked CHEAPER)
 * across the head/body boundary and the rendezvous; SEND_LATER data changed after mad_pack is
 * sent changed, SEND_SAFER data is not; several large pieces in one message; an unpacking that
 * does not match fails with MPI_ERR_TRUNCATE and leaves the channel usable; bad arguments give
 * MPI_ERR_ARG / MPI_ERR_RANK; mad_begin_unpacking from any source names the sender. Heads
 * (express and small pieces) around and beyond the size of the receiver's pre-posted head
 * buffer (2 x 4096 + 8 bytes), which then travel as an announcement and the head.
 */
#include "../p2p/common.h"
#include <madeleine.h>

static const size_t sizes[] = {0, 1, 10, 4096, 4097, 20000, 100000, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void rpc(mad_channel_t ch, int peer, int client)
{
    for (unsigned k = 0; k < NSIZES; k++) {
        if (client) {
            size_t n = sizes[k];
            unsigned char *a = xmalloc(n);
            fill(a, n, k, 1);
            mad_connection_t c;
            MPI_OK(mad_begin_packing(ch, peer, &c));
            MPI_OK(mad_pack(c, &n, sizeof n, mad_send_CHEAPER, mad_receive_EXPRESS));
            MPI_OK(mad_pack(c, a, n, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_end_packing(&c));
            CHECK(c == NULL);
            free(a);
        } else {
            size_t n = 0;
            mad_connection_t c;
            MPI_OK(mad_begin_unpacking(ch, &c));
            int from = -1;
            MPI_OK(mad_connection_remote(c, &from));
            CHECK(from == peer);
            MPI_OK(mad_unpack(c, &n, sizeof n, mad_send_CHEAPER, mad_receive_EXPRESS));
            CHECKF(n == sizes[k], "size %zu, expected %zu", n, sizes[k]);
            unsigned char *a = xmalloc(n);
            MPI_OK(mad_unpack(c, a, n, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_end_unpacking(&c));
            CHECK(c == NULL);
            CHECKF(verify(a, n, k, 1) < 0, "array of %zu bytes wrong", n);
            free(a);
        }
    }
}

/* SEND_LATER reads at mad_end_packing, SEND_SAFER at mad_pack; several large pieces. */
static void modes(mad_channel_t ch, int peer, int sender)
{
    const size_t big = 50000, small = 100;
    if (sender) {
        int x = 1;
        unsigned char *later = xmalloc(big), *safer = xmalloc(big), *cheap = xmalloc(big);
        unsigned char s1[100], s2[100];
        fill(later, big, 9, 9);
        fill(safer, big, 2, 2);
        fill(cheap, big, 3, 3);
        fill(s1, small, 4, 4);
        fill(s2, small, 5, 5);
        mad_connection_t c;
        MPI_OK(mad_begin_packing(ch, peer, &c));
        MPI_OK(mad_pack(c, &x, sizeof x, mad_send_LATER, mad_receive_EXPRESS));
        MPI_OK(mad_pack(c, later, big, mad_send_LATER, mad_receive_CHEAPER));
        MPI_OK(mad_pack(c, s1, small, mad_send_SAFER, mad_receive_CHEAPER));
        MPI_OK(mad_pack(c, safer, big, mad_send_SAFER, mad_receive_CHEAPER));
        MPI_OK(mad_pack(c, s2, small, mad_send_LATER, mad_receive_EXPRESS));
        MPI_OK(mad_pack(c, cheap, big, mad_send_CHEAPER, mad_receive_CHEAPER));
        /* After packing: LATER changes are sent, SAFER changes are not. */
        x = 42;
        fill(later, big, 1, 1);
        fill(s2, small, 6, 6);
        fill(safer, big, 7, 7);
        fill(s1, small, 8, 8);
        MPI_OK(mad_end_packing(&c));
        free(later);
        free(safer);
        free(cheap);
    } else {
        int x = 0;
        unsigned char *later = xmalloc(big), *safer = xmalloc(big), *cheap = xmalloc(big);
        unsigned char s1[100], s2[100];
        mad_connection_t c;
        MPI_OK(mad_begin_unpacking_from(ch, peer, &c));
        MPI_OK(mad_unpack(c, &x, sizeof x, mad_send_LATER, mad_receive_EXPRESS));
        CHECKF(x == 42, "LATER express value %d", x);
        MPI_OK(mad_unpack(c, later, big, mad_send_LATER, mad_receive_CHEAPER));
        MPI_OK(mad_unpack(c, s1, small, mad_send_SAFER, mad_receive_CHEAPER));
        MPI_OK(mad_unpack(c, safer, big, mad_send_SAFER, mad_receive_CHEAPER));
        MPI_OK(mad_unpack(c, s2, small, mad_send_LATER, mad_receive_EXPRESS));
        CHECK(verify(s2, small, 6, 6) < 0);
        MPI_OK(mad_unpack(c, cheap, big, mad_send_CHEAPER, mad_receive_CHEAPER));
        MPI_OK(mad_end_unpacking(&c));
        CHECK(verify(later, big, 1, 1) < 0);
        CHECK(verify(s1, small, 4, 4) < 0);
        CHECK(verify(safer, big, 2, 2) < 0);
        CHECK(verify(cheap, big, 3, 3) < 0);
        free(later);
        free(safer);
        free(cheap);
    }
}

/* A receiver that unpacks less than was packed: MPI_ERR_TRUNCATE at the end, and the next
 * message is read right. */
static void mismatch(mad_channel_t ch, int peer, int sender)
{
    int v[4] = {1, 2, 3, 4};
    unsigned char *big = xmalloc(30000);
    if (sender) {
        fill(big, 30000, 5, 1);
        for (int m = 0; m < 2; m++) {
            mad_connection_t c;
            MPI_OK(mad_begin_packing(ch, peer, &c));
            MPI_OK(mad_pack(c, v, sizeof v, mad_send_SAFER, mad_receive_EXPRESS));
            MPI_OK(mad_pack(c, big, 30000, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_end_packing(&c));
        }
    } else {
        int w[4] = {0, 0, 0, 0};
        mad_connection_t c;
        MPI_OK(mad_begin_unpacking_from(ch, peer, &c));
        MPI_OK(mad_unpack(c, w, 2 * sizeof(int), mad_send_SAFER, mad_receive_EXPRESS));
        CHECK(w[0] == 1 && w[1] == 2);
        MPI_OK(mad_unpack(c, big, 20000, mad_send_CHEAPER, mad_receive_CHEAPER));
        EXPECT_CLASS(mad_end_unpacking(&c), MPI_ERR_TRUNCATE);
        /* Asking for more than the head holds fails at once. */
        MPI_OK(mad_begin_unpacking_from(ch, peer, &c));
        EXPECT_CLASS(mad_unpack(c, w, 8 * sizeof(int), mad_send_SAFER, mad_receive_EXPRESS),
                     MPI_ERR_TRUNCATE);
        EXPECT_CLASS(mad_end_unpacking(&c), MPI_ERR_TRUNCATE);
        CHECK(c == NULL);
    }
    free(big);
}

/* Heads of every size around the receiver's pre-posted buffer: one express piece of n bytes
 * plus two small cheaper pieces (in the head too), then a large cheaper piece (the body). */
static void long_heads(mad_channel_t ch, int peer, int sender)
{
    static const size_t hs[] = {8176, 8184, 8185, 8192, 8193, 12000, 70000};
    const size_t nh = sizeof hs / sizeof hs[0], small = 4, bulk = 20000;
    unsigned char *e = xmalloc(70000), *b = xmalloc(bulk), s1[4], s2[4];
    for (unsigned k = 0; k < nh; k++) {
        size_t n = hs[k];
        mad_connection_t c;
        if (sender) {
            fill(e, n, k, 3);
            fill(b, bulk, k, 4);
            fill(s1, small, k, 5);
            fill(s2, small, k, 6);
            MPI_OK(mad_begin_packing(ch, peer, &c));
            MPI_OK(mad_pack(c, s1, small, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_pack(c, e, n, mad_send_CHEAPER, mad_receive_EXPRESS));
            MPI_OK(mad_pack(c, b, bulk, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_pack(c, s2, small, mad_send_SAFER, mad_receive_CHEAPER));
            MPI_OK(mad_end_packing(&c));
        } else {
            memset(e, 0, n);
            memset(b, 0, bulk);
            MPI_OK(mad_begin_unpacking_from(ch, peer, &c));
            MPI_OK(mad_unpack(c, s1, small, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_unpack(c, e, n, mad_send_CHEAPER, mad_receive_EXPRESS));
            CHECKF(verify(e, n, k, 3) < 0, "express piece of %zu bytes wrong", n);
            MPI_OK(mad_unpack(c, b, bulk, mad_send_CHEAPER, mad_receive_CHEAPER));
            MPI_OK(mad_unpack(c, s2, small, mad_send_SAFER, mad_receive_CHEAPER));
            MPI_OK(mad_end_unpacking(&c));
            CHECKF(verify(b, bulk, k, 4) < 0, "body after a head of %zu bytes wrong", n);
            CHECK(verify(s1, small, k, 5) < 0 && verify(s2, small, k, 6) < 0);
        }
    }
    /* A long head unpacked short: MPI_ERR_TRUNCATE, and the next message still reads right. */
    if (sender) {
        for (int m = 0; m < 2; m++) {
            mad_connection_t c;
            fill(e, 12000, m, 7);
            MPI_OK(mad_begin_packing(ch, peer, &c));
            MPI_OK(mad_pack(c, e, 12000, mad_send_CHEAPER, mad_receive_EXPRESS));
            MPI_OK(mad_end_packing(&c));
        }
    } else {
        mad_connection_t c;
        MPI_OK(mad_begin_unpacking_from(ch, peer, &c));
        MPI_OK(mad_unpack(c, e, 100, mad_send_CHEAPER, mad_receive_EXPRESS));
        EXPECT_CLASS(mad_end_unpacking(&c), MPI_ERR_TRUNCATE);
        MPI_OK(mad_begin_unpacking_from(ch, peer, &c));
        MPI_OK(mad_unpack(c, e, 12000, mad_send_CHEAPER, mad_receive_EXPRESS));
        MPI_OK(mad_end_unpacking(&c));
        CHECK(verify(e, 12000, 1, 7) < 0);
    }
    free(e);
    free(b);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size < 2) {
        if (t_rank == 0)
            printf("OK madeleine (needs 2 ranks: skipped)\n");
        MPI_Finalize();
        return 0;
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    mad_channel_t ch;
    MPI_OK(mad_open_channel(MPI_COMM_WORLD, &ch));

    int peer = t_rank ^ 1;
    int paired = peer < t_size;
    int even = (t_rank % 2) == 0;
    if (paired) {
        rpc(ch, peer, even);
        rpc(ch, peer, !even);
        modes(ch, peer, even);
        mismatch(ch, peer, even);
        long_heads(ch, peer, even);
        long_heads(ch, peer, !even);
    }

    /* Bad arguments. */
    mad_connection_t c = NULL;
    EXPECT_CLASS(mad_begin_packing(ch, t_size, &c), MPI_ERR_RANK);
    EXPECT_CLASS(mad_begin_packing(ch, -1, &c), MPI_ERR_RANK);
    EXPECT_CLASS(mad_begin_packing(NULL, 0, &c), MPI_ERR_ARG);
    EXPECT_CLASS(mad_pack(NULL, &c, 1, mad_send_SAFER, mad_receive_EXPRESS), MPI_ERR_ARG);
    MPI_OK(mad_begin_packing(ch, t_rank, &c));
    EXPECT_CLASS(mad_pack(c, &c, 1, 7, mad_receive_EXPRESS), MPI_ERR_ARG);
    EXPECT_CLASS(mad_pack(c, &c, 1, mad_send_SAFER, 5), MPI_ERR_ARG);
    EXPECT_CLASS(mad_unpack(c, &c, 1, mad_send_SAFER, mad_receive_EXPRESS), MPI_ERR_ARG);
    EXPECT_CLASS(mad_end_unpacking(&c), MPI_ERR_ARG);
    /* A message to oneself. */
    int self = 1000 + t_rank, got = 0;
    MPI_OK(mad_pack(c, &self, sizeof self, mad_send_CHEAPER, mad_receive_EXPRESS));
    MPI_OK(mad_end_packing(&c));
    EXPECT_CLASS(mad_end_packing(&c), MPI_ERR_ARG);
    MPI_OK(mad_begin_unpacking_from(ch, t_rank, &c));
    MPI_OK(mad_unpack(c, &got, sizeof got, mad_send_CHEAPER, mad_receive_EXPRESS));
    CHECK(got == self);
    MPI_OK(mad_end_unpacking(&c));

    /* Any source: every other rank sends to rank 0, which learns who sent each message (after
     * the pairs are done: rank 0 unpacks from any source in rpc() too). */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        int seen = 0;
        int *arr = xmalloc(3000 * sizeof(int));
        for (int i = 1; i < 2 * t_size - 1; i++) {
            int from = -1, val = -1;
            MPI_OK(mad_begin_unpacking(ch, &c));
            MPI_OK(mad_connection_remote(c, &from));
            MPI_OK(mad_unpack(c, &val, sizeof val, mad_send_CHEAPER, mad_receive_EXPRESS));
            CHECKF(val == 7 * from && from > 0 && from < t_size, "from %d val %d", from, val);
            if (seen & (1 << from)) {
                /* The second message of each sender has a head longer than the buffer. */
                MPI_OK(mad_unpack(c, arr, 3000 * sizeof(int), mad_send_CHEAPER,
                                  mad_receive_EXPRESS));
                for (int j = 0; j < 3000; j++)
                    CHECKF(arr[j] == from + j, "from %d element %d: %d", from, j, arr[j]);
            }
            MPI_OK(mad_end_unpacking(&c));
            seen |= 1 << from;
        }
        free(arr);
        CHECK(seen == (1 << t_size) - 2);
    } else {
        int val = 7 * t_rank;
        MPI_OK(mad_begin_packing(ch, 0, &c));
        MPI_OK(mad_pack(c, &val, sizeof val, mad_send_CHEAPER, mad_receive_EXPRESS));
        MPI_OK(mad_end_packing(&c));
        int *arr = xmalloc(3000 * sizeof(int));
        for (int j = 0; j < 3000; j++)
            arr[j] = t_rank + j;
        MPI_OK(mad_begin_packing(ch, 0, &c));
        MPI_OK(mad_pack(c, &val, sizeof val, mad_send_CHEAPER, mad_receive_EXPRESS));
        MPI_OK(mad_pack(c, arr, 3000 * sizeof(int), mad_send_CHEAPER, mad_receive_EXPRESS));
        MPI_OK(mad_end_packing(&c));
        free(arr);
    }

    MPI_OK(mad_close_channel(&ch));
    CHECK(ch == NULL);
    EXPECT_CLASS(mad_close_channel(&ch), MPI_ERR_ARG);
    t_done("madeleine");
    return 0;
}
