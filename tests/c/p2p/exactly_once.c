/* exactly_once.c - many messages of varied sizes between two ranks, each
 * checked for loss, duplication, reordering and corruption: what a lossy
 * link made reliable by its NIC (madmpi's emulated BCL-3 with
 * MADMPI_EMU_LOSS) must deliver through MPI.
 *
 * Both ranks send N messages (argv[1], default 20000) to each other at once,
 * in windows of W non-blocking sends and receives.  Message k carries a
 * 24-byte header (k, its payload length, a checksum of the payload) and a
 * payload generated from (k, direction): mostly 0-248 bytes, every 61st
 * 1-16 KiB (eager), every 1021st 64-256 KiB (rendezvous).  The receiver
 * checks that message k arrives k-th (tag k mod 32768, received with
 * MPI_ANY_TAG), with its length, its checksum and every byte of the payload
 * it regenerates; after the last one and a barrier, that nothing more is
 * pending (a duplicate would be).  Rank 0 prints the messages checked on both
 * ranks.  Exactly 2 ranks. */
#include "common.h"

#define W 32
#define HDR 24
#define BIG (256u << 10)
#define MAXMSG (HDR + BIG)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static size_t payload_len(uint64_t k)
{
    uint64_t r = mix(k * 2 + 1);
    if (k % 1021 == 1020)
        return (64u << 10) + (size_t)(r % (BIG - (64u << 10) + 1));
    if (k % 61 == 60)
        return 1024 + (size_t)(r % (15u << 10));
    return (size_t)(r % 249);
}

/* Payload bytes of message k in direction dir (0: rank 0 to 1). */
static void make_payload(unsigned char *p, size_t n, uint64_t k, int dir)
{
    uint64_t s = mix(k * 4 + (uint64_t)dir + 7) | 1;
    size_t i = 0;
    while (i < n) {
        uint64_t v = rng_next(&s);
        for (int b = 0; b < 8 && i < n; b++, i++)
            p[i] = (unsigned char)(v >> (8 * b));
    }
}

/* FNV-1a, 64 bits. */
static uint64_t checksum(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Build message k (direction dir) into m; its size in bytes. */
static int build(unsigned char *m, uint64_t k, int dir)
{
    size_t n = payload_len(k);
    make_payload(m + HDR, n, k, dir);
    put64(m, k);
    put64(m + 8, n);
    put64(m + 16, checksum(m + HDR, n));
    return (int)(HDR + n);
}

/* Check received message m (got bytes, status tag) is message k of direction dir. */
static void check(const unsigned char *m, int got, int tag, uint64_t k, int dir,
                  unsigned char *want)
{
    size_t n = payload_len(k);
    CHECKF(tag == (int)(k % 32768), "message %llu: tag %d (expected %d): lost, duplicated or "
           "reordered", (unsigned long long)k, tag, (int)(k % 32768));
    CHECKF(got == (int)(HDR + n), "message %llu: %d bytes, expected %zu",
           (unsigned long long)k, got, HDR + n);
    CHECKF(get64(m) == k, "message %llu arrived in place of message %llu",
           (unsigned long long)get64(m), (unsigned long long)k);
    CHECKF(get64(m + 8) == n, "message %llu: header length %llu, expected %zu",
           (unsigned long long)k, (unsigned long long)get64(m + 8), n);
    CHECKF(checksum(m + HDR, n) == get64(m + 16), "message %llu: checksum mismatch",
           (unsigned long long)k);
    make_payload(want, n, k, dir);
    if (memcmp(want, m + HDR, n) != 0) {
        size_t i = 0;
        while (want[i] == m[HDR + i])
            i++;
        FAILF("message %llu (%zu bytes): payload byte %zu corrupted", (unsigned long long)k,
              n, i);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECKF(t_size == 2, "exactly 2 ranks, not %d", t_size);
    long long total = argc > 1 ? atoll(argv[1]) : 20000;
    CHECK(total > 0);
    uint64_t n = (uint64_t)total;
    int peer = 1 - t_rank, out_dir = t_rank, in_dir = peer;
    unsigned char *sbuf = (unsigned char *)xmalloc((size_t)W * MAXMSG);
    unsigned char *rbuf = (unsigned char *)xmalloc((size_t)W * MAXMSG);
    unsigned char *want = (unsigned char *)xmalloc(BIG);
    MPI_Request rq[2 * W];
    MPI_Status st[2 * W];
    uint64_t checked = 0, bytes = 0;

    for (uint64_t base = 0; base < n; base += W) {
        int w = (int)(n - base < W ? n - base : W);
        for (int i = 0; i < w; i++)
            MPI_OK(MPI_Irecv(rbuf + (size_t)i * MAXMSG, (int)MAXMSG, MPI_BYTE, peer,
                             MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i]));
        for (int i = 0; i < w; i++) {
            uint64_t k = base + (uint64_t)i;
            unsigned char *m = sbuf + (size_t)i * MAXMSG;
            int len = build(m, k, out_dir);
            MPI_OK(MPI_Isend(m, len, MPI_BYTE, peer, (int)(k % 32768), MPI_COMM_WORLD,
                             &rq[w + i]));
        }
        MPI_OK(MPI_Waitall(2 * w, rq, st));
        for (int i = 0; i < w; i++) {
            int got = -1;
            MPI_OK(MPI_Get_count(&st[i], MPI_BYTE, &got));
            check(rbuf + (size_t)i * MAXMSG, got, st[i].MPI_TAG, base + (uint64_t)i, in_dir,
                  want);
            checked++;
            bytes += (uint64_t)got;
        }
    }
    /* Nothing more may arrive: a duplicate of any message would be pending now. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int tries = 0; tries < 100; tries++) {
        int flag = 0;
        MPI_Status s;
        MPI_OK(MPI_Iprobe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &s));
        CHECKF(!flag, "a message (tag %d) arrived after the last one", s.MPI_TAG);
    }
    uint64_t mine[2] = {checked, bytes}, all[2] = {0, 0};
    MPI_OK(MPI_Reduce(mine, all, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD));
    if (t_rank == 0) {
        CHECK(all[0] == 2 * n);
        printf("exactly_once: %llu messages checked (%llu bytes), none lost, duplicated, "
               "reordered or corrupted\n",
               (unsigned long long)all[0], (unsigned long long)all[1]);
    }
    free(sbuf);
    free(rbuf);
    free(want);
    t_done("exactly_once");
    return 0;
}
