/* many.c - many ranks on one node over shared memory: every rank sends to its
 * next PEERS ranks (more senders per receiver than the shm driver's pair
 * rings, so some share the receiver's inbox) messages of sizes from 0 to
 * 40 KiB (eager and rendezvous), received with MPI_ANY_SOURCE and
 * MPI_ANY_TAG; every byte and the order per sender are checked. Then
 * collectives with byte checks: Allreduce, Bcast, Alltoall, Barrier.
 * Prints "ranks <ranks>" and "OK many" on rank 0. Usage: many [messages per peer]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEERS 12
#define MAXLEN (40 * 1024)

static int fail(int rank, const char *what, long a, long b)
{
    fprintf(stderr, "many: rank %d: %s (%ld, %ld)\n", rank, what, a, b);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

static long msg_len(int src, int seq)
{
    long l = ((long)src * 7919 + (long)seq * 104729) % 1000;
    if (seq % 5 == 4)
        l = MAXLEN - (src % 100) * 8; /* rendezvous */
    return l;
}

static unsigned char msg_byte(int src, int seq, long i)
{
    return (unsigned char)(src * 31 + seq * 7 + i);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int per = argc > 1 ? atoi(argv[1]) : 20;
    int peers = PEERS < size - 1 ? PEERS : size - 1;
    long nsend = (long)peers * per;

    unsigned char **sbuf = malloc(sizeof *sbuf * (size_t)nsend);
    MPI_Request *req = malloc(sizeof *req * (size_t)nsend);
    unsigned char *rbuf = malloc(65536); /* >= MAXLEN, and the Bcast */
    int *next = calloc((size_t)size, sizeof *next);
    if (!sbuf || !req || !rbuf || !next)
        return fail(rank, "out of memory", 0, 0);

    /* Message `seq` to each of the next `peers` ranks, with tag seq % 3: MPI
     * orders the messages of one sender and tag, which the receiver checks. */
    long k = 0;
    for (int seq = 0; seq < per; seq++)
        for (int p = 1; p <= peers; p++, k++) {
            int dst = (rank + p) % size;
            long len = msg_len(rank, seq);
            sbuf[k] = malloc(len ? (size_t)len : 1);
            if (!sbuf[k])
                return fail(rank, "out of memory", len, 0);
            for (long i = 0; i < len; i++)
                sbuf[k][i] = msg_byte(rank, seq, i);
            MPI_Isend(sbuf[k], (int)len, MPI_BYTE, dst, seq % 3,
                      MPI_COMM_WORLD, &req[k]);
        }

    /* Per sender and tag, sequence numbers arrive in order. */
    int *next_tag = calloc((size_t)size * 3, sizeof *next_tag);
    if (!next_tag)
        return fail(rank, "out of memory", 0, 0);
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < size; s++)
            next_tag[s * 3 + t] = t;
    for (long r = 0; r < nsend; r++) {
        MPI_Status st;
        int count;
        MPI_Recv(rbuf, MAXLEN, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                 MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        int src = st.MPI_SOURCE, tag = st.MPI_TAG;
        int d = (rank - src + size) % size;
        if (d < 1 || d > peers || tag < 0 || tag > 2)
            return fail(rank, "message from an unexpected sender/tag", src, tag);
        int seq = next_tag[src * 3 + tag];
        next_tag[src * 3 + tag] += 3;
        next[src]++;
        if (seq >= per || count != msg_len(src, seq))
            return fail(rank, "wrong length or order", src, seq);
        for (long i = 0; i < count; i++)
            if (rbuf[i] != msg_byte(src, seq, i))
                return fail(rank, "wrong byte", src, i);
    }
    for (int s = 0; s < size; s++) {
        int d = (rank - s + size) % size;
        if (next[s] != (d >= 1 && d <= peers ? per : 0))
            return fail(rank, "messages missing", s, next[s]);
    }
    MPI_Waitall((int)nsend, req, MPI_STATUSES_IGNORE);
    for (long i = 0; i < nsend; i++)
        free(sbuf[i]);

    /* Collectives. */
    enum { N = 1000 };
    static int in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = rank * 3 + i;
    MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++)
        if (out[i] != 3 * (size * (size - 1) / 2) + size * i)
            return fail(rank, "allreduce", i, out[i]);
    int root = 3 % size;
    for (long i = 0; i < 65536; i++)
        rbuf[i] = rank == root ? (unsigned char)(i * 13) : 0;
    MPI_Bcast(rbuf, 65536, MPI_BYTE, root, MPI_COMM_WORLD);
    for (long i = 0; i < 65536; i++)
        if (rbuf[i] != (unsigned char)(i * 13))
            return fail(rank, "bcast", i, rbuf[i]);
    int *a = malloc(sizeof *a * (size_t)size * 2);
    int *b = malloc(sizeof *b * (size_t)size * 2);
    if (!a || !b)
        return fail(rank, "out of memory", 0, 0);
    for (int i = 0; i < size; i++) {
        a[2 * i] = rank;
        a[2 * i + 1] = i;
    }
    MPI_Alltoall(a, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        if (b[2 * i] != i || b[2 * i + 1] != rank)
            return fail(rank, "alltoall", i, b[2 * i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("ranks %d\nOK many\n", size);
    free(a);
    free(b);
    free(next_tag);
    free(next);
    free(rbuf);
    free(req);
    free(sbuf);
    MPI_Finalize();
    return 0;
}
