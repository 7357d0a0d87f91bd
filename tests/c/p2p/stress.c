/* stress.c - every rank sends NMSG messages of random sizes (0 .. 1 MiB,
 * mostly small) with random tags to random ranks (itself included), with
 * standard and synchronous non-blocking sends in a window, while receiving
 * with MPI_ANY_SOURCE / MPI_ANY_TAG (probe then receive, matched probes,
 * and wildcard receives into a large buffer).  The plans are deterministic,
 * so every receiver knows what each source sends it, in which order: every
 * message is checked (size, tag, contents) and the per-source checksums are
 * compared at the end.  Any number of ranks (written for 4).
 * Usage: stress [messages per rank] */
#include "common.h"

#define MAXSZ (1 << 20)
#define WINDOW 16

struct msg {
    int dest, tag;
    size_t size;
};

static size_t pick_size(uint64_t *s)
{
    uint64_t r = rng_next(s) % 1000;
    if (r < 5)
        return (size_t)(rng_next(s) % (MAXSZ + 1)); /* up to 1 MiB */
    if (r < 60)
        return (size_t)(rng_next(s) % 65536);
    if (r < 100)
        return 0;
    return (size_t)(rng_next(s) % 2048);
}

/* The plan of rank `src`: its messages in sending order. */
static void plan(int src, int nmsg, struct msg *out)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)(src + 1) * 0x100000001b3ULL);
    for (int i = 0; i < nmsg; i++) {
        out[i].dest = (int)(rng_next(&s) % (uint64_t)t_size);
        out[i].tag = (int)(rng_next(&s) % 8);
        out[i].size = pick_size(&s);
    }
}

static uint64_t sum_bytes(const unsigned char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int nmsg = argc > 1 ? atoi(argv[1]) : 1500;
    struct msg *mine = xmalloc(sizeof(struct msg) * (size_t)nmsg);
    plan(t_rank, nmsg, mine);

    /* What each source sends me, in order: [src][k] = index into its plan. */
    int **expect = xmalloc(sizeof(int *) * (size_t)t_size);
    int *nexp = calloc((size_t)t_size, sizeof(int));
    int *got = calloc((size_t)t_size, sizeof(int));
    uint64_t *want_sum = calloc((size_t)t_size, sizeof(uint64_t));
    uint64_t *have_sum = calloc((size_t)t_size, sizeof(uint64_t));
    struct msg *other = xmalloc(sizeof(struct msg) * (size_t)nmsg);
    int total_in = 0;
    for (int src = 0; src < t_size; src++) {
        plan(src, nmsg, other);
        expect[src] = xmalloc(sizeof(int) * (size_t)nmsg);
        want_sum[src] = have_sum[src] = 1469598103934665603ULL;
        for (int i = 0; i < nmsg; i++)
            if (other[i].dest == t_rank) {
                expect[src][nexp[src]++] = i;
                unsigned char *tmp = xmalloc(other[i].size);
                fill(tmp, other[i].size, (unsigned)src, (unsigned)i);
                want_sum[src] = sum_bytes(tmp, other[i].size, want_sum[src]);
                free(tmp);
            }
        total_in += nexp[src];
    }

    unsigned char *rbuf = xmalloc(MAXSZ);
    MPI_Request sreq[WINDOW];
    unsigned char *sbuf[WINDOW];
    for (int w = 0; w < WINDOW; w++) {
        sreq[w] = MPI_REQUEST_NULL;
        sbuf[w] = xmalloc(MAXSZ);
    }
    int sent = 0, received = 0;
    uint64_t rs = 12345 + (uint64_t)t_rank;

    while (sent < nmsg || received < total_in) {
        /* Keep the send window full. */
        for (int w = 0; w < WINDOW && sent < nmsg; w++) {
            int done = 1;
            if (sreq[w] != MPI_REQUEST_NULL)
                MPI_OK(MPI_Test(&sreq[w], &done, MPI_STATUS_IGNORE));
            if (!done)
                continue;
            struct msg *m = &mine[sent];
            fill(sbuf[w], m->size, (unsigned)t_rank, (unsigned)sent);
            if (sent % 5 == 4)
                MPI_OK(MPI_Issend(sbuf[w], (int)m->size, MPI_BYTE, m->dest, m->tag, MPI_COMM_WORLD, &sreq[w]));
            else
                MPI_OK(MPI_Isend(sbuf[w], (int)m->size, MPI_BYTE, m->dest, m->tag, MPI_COMM_WORLD, &sreq[w]));
            sent++;
        }
        if (received == total_in)
            continue;
        /* Receive whatever is there, one of three ways. */
        MPI_Status st;
        int flag = 0, way = (int)(rng_next(&rs) % 3);
        if (way == 2 && sent == nmsg) {
            /* A blocking wildcard receive is safe once all my sends are
             * posted: they progress while I wait. */
            MPI_OK(MPI_Recv(rbuf, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            flag = 1;
        } else if (way == 1) {
            MPI_Message msg;
            MPI_OK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
            if (flag) {
                int n;
                MPI_OK(MPI_Get_count(&st, MPI_BYTE, &n));
                MPI_OK(MPI_Mrecv(rbuf, n, MPI_BYTE, &msg, &st));
            }
        } else {
            MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            if (flag) {
                int n;
                MPI_OK(MPI_Get_count(&st, MPI_BYTE, &n));
                MPI_OK(MPI_Recv(rbuf, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
            }
        }
        if (!flag)
            continue;
        int src = st.MPI_SOURCE;
        CHECK(src >= 0 && src < t_size);
        CHECKF(got[src] < nexp[src], "unexpected extra message from %d", src);
        int idx = expect[src][got[src]++];
        plan(src, nmsg, other);
        int n;
        MPI_OK(MPI_Get_count(&st, MPI_BYTE, &n));
        CHECKF((size_t)n == other[idx].size && st.MPI_TAG == other[idx].tag,
               "from %d message %d: %d bytes tag %d, expected %zu bytes tag %d", src, idx, n, st.MPI_TAG,
               other[idx].size, other[idx].tag);
        long bad = verify(rbuf, (size_t)n, (unsigned)src, (unsigned)idx);
        CHECKF(bad < 0, "from %d message %d (%d bytes): byte %ld wrong", src, idx, n, bad);
        have_sum[src] = sum_bytes(rbuf, (size_t)n, have_sum[src]);
        received++;
    }
    MPI_OK(MPI_Waitall(WINDOW, sreq, MPI_STATUSES_IGNORE));
    for (int src = 0; src < t_size; src++)
        CHECKF(have_sum[src] == want_sum[src] && got[src] == nexp[src], "checksum from %d", src);

    for (int w = 0; w < WINDOW; w++)
        free(sbuf[w]);
    for (int src = 0; src < t_size; src++)
        free(expect[src]);
    free(expect);
    free(nexp);
    free(got);
    free(want_sum);
    free(have_sum);
    free(other);
    free(mine);
    free(rbuf);
    if (t_rank == 0)
        printf("stress: %d messages per rank\n", nmsg);
    t_done("stress");
    return 0;
}
