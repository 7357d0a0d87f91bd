/* probe.c - receiving messages whose size and origin are not known in advance.
 *
 * Every rank sends K messages to every rank (itself included) with MPI_Isend;
 * their sizes (0 bytes to ~300 KB, so both eager and rendezvous paths are
 * used) and tags vary with sender, receiver and sequence number.  Each rank
 * then receives size*K messages with MPI_ANY_SOURCE / MPI_ANY_TAG, learning
 * each size before allocating the buffer, in four ways:
 *
 *   phase 0: MPI_Probe   + MPI_Get_count + malloc + MPI_Recv
 *   phase 1: MPI_Mprobe  + MPI_Get_count + malloc + MPI_Mrecv
 *   phase 2: MPI_Iprobe polling loop     + malloc + MPI_Recv
 *   phase 3: MPI_Improbe polling loop    + malloc + MPI_Mrecv
 *
 * Each payload is checked byte by byte, each (source, sequence) must arrive
 * exactly once, and the receive status must agree with the probe status.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 6
#define NPHASES 4

static const int sizes[] = {0, 1, 17, 1000, 4096, 70000, 300000};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static const char *const phase_names[NPHASES] = {
    "Probe+Recv", "Mprobe+Mrecv", "Iprobe+Recv", "Improbe+Mrecv"};

static int msg_size(int src, int dst, int k)
{
    return sizes[(src * 3 + dst * 5 + k) % NSIZES];
}

static int msg_tag(int phase, int k) { return phase * 100 + k; }

static unsigned char byte_at(int src, int tag, int i)
{
    return (unsigned char)(src * 31 + tag * 7 + i * 13 + (i >> 8));
}

/* Allocates at least one byte so that a 0-byte message still gets a valid
 * buffer pointer. */
static unsigned char *xmalloc(size_t n)
{
    unsigned char *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "probe: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static int run_phase(int phase, int rank, int size)
{
    int failed = 0;
    unsigned char **sbufs = malloc((size_t)size * K * sizeof *sbufs);
    MPI_Request *reqs = malloc((size_t)size * K * sizeof *reqs);
    int *seen = calloc((size_t)size * K, sizeof *seen);
    if (sbufs == NULL || reqs == NULL || seen == NULL) {
        fprintf(stderr, "probe: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (int dst = 0; dst < size; dst++) {
        for (int k = 0; k < K; k++) {
            int n = msg_size(rank, dst, k);
            int tag = msg_tag(phase, k);
            unsigned char *b = xmalloc((size_t)n);
            for (int i = 0; i < n; i++)
                b[i] = byte_at(rank, tag, i);
            sbufs[dst * K + k] = b;
            MPI_Isend(b, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD,
                      &reqs[dst * K + k]);
        }
    }

    long polls = 0;
    for (int m = 0; m < size * K; m++) {
        MPI_Status pst, rst;
        MPI_Message msg = MPI_MESSAGE_NULL;
        int flag = 0;
        switch (phase) {
        case 0:
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pst);
            break;
        case 1:
            MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &pst);
            break;
        case 2:
            while (!flag) {
                MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                           &pst);
                polls++;
            }
            break;
        default:
            while (!flag) {
                MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                            &msg, &pst);
                polls++;
            }
            break;
        }
        int count = -1;
        MPI_Get_count(&pst, MPI_BYTE, &count);
        int src = pst.MPI_SOURCE, tag = pst.MPI_TAG;
        int k = tag - msg_tag(phase, 0);
        if (src < 0 || src >= size || k < 0 || k >= K) {
            fprintf(stderr, "probe: rank %d %s: probe returned source %d tag "
                    "%d\n", rank, phase_names[phase], src, tag);
            /* Cannot continue: the message cannot be matched to a sender. */
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        int want = msg_size(src, rank, k);
        if (count != want) {
            fprintf(stderr, "probe: rank %d %s: message from %d tag %d has "
                    "%d bytes, expected %d\n", rank, phase_names[phase], src,
                    tag, count, want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        unsigned char *rbuf = xmalloc((size_t)count);
        memset(rbuf, 0xEE, (size_t)(count > 0 ? count : 1));
        if (phase == 1 || phase == 3)
            MPI_Mrecv(rbuf, count, MPI_BYTE, &msg, &rst);
        else
            MPI_Recv(rbuf, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, &rst);
        if ((phase == 1 || phase == 3) && msg != MPI_MESSAGE_NULL) {
            fprintf(stderr, "probe: rank %d: MPI_Mrecv did not reset the "
                    "message handle\n", rank);
            failed = 1;
        }
        int rcount = -1;
        MPI_Get_count(&rst, MPI_BYTE, &rcount);
        if (rst.MPI_SOURCE != src || rst.MPI_TAG != tag || rcount != count) {
            fprintf(stderr, "probe: rank %d %s: probe said (%d, %d, %d B), "
                    "receive said (%d, %d, %d B)\n", rank, phase_names[phase],
                    src, tag, count, rst.MPI_SOURCE, rst.MPI_TAG, rcount);
            failed = 1;
        }
        for (int i = 0; i < count; i++) {
            if (rbuf[i] != byte_at(src, tag, i)) {
                fprintf(stderr, "probe: rank %d %s: message from %d tag %d: "
                        "wrong byte at offset %d\n", rank, phase_names[phase],
                        src, tag, i);
                failed = 1;
                break;
            }
        }
        free(rbuf);
        if (seen[src * K + k]++) {
            fprintf(stderr, "probe: rank %d %s: message (%d, %d) received "
                    "twice\n", rank, phase_names[phase], src, k);
            failed = 1;
        }
    }

    /* A real status array rather than MPI_STATUSES_IGNORE: GCC's
     * -Wstringop-overflow misreads that constant as a zero-sized array with
     * some mpi.h headers (MPICH's). */
    MPI_Status *sst = malloc((size_t)size * K * sizeof *sst);
    if (sst == NULL) {
        fprintf(stderr, "probe: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Waitall(size * K, reqs, sst);
    free(sst);
    for (int i = 0; i < size * K; i++)
        free(sbufs[i]);
    free(sbufs);
    free(reqs);
    free(seen);

    if (!failed) {
        /* Nothing may be left over once every expected message is in. */
        int flag = 1;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                   MPI_STATUS_IGNORE);
        if (flag) {
            fprintf(stderr, "probe: rank %d %s: unexpected extra message\n",
                    rank, phase_names[phase]);
            failed = 1;
        }
    }
    if (rank == 0 && !failed)
        printf("probe: %-14s %d messages per rank%s\n", phase_names[phase],
               size * K, (phase >= 2 && polls > 0) ? " (polling)" : "");
    return failed;
}

int main(int argc, char **argv)
{
    int rank, size, failed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    for (int phase = 0; phase < NPHASES; phase++) {
        int f = run_phase(phase, rank, size);
        int any = 0;
        MPI_Allreduce(&f, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            failed = 1;
            break;
        }
    }

    if (rank == 0 && !failed)
        printf("probe: OK (%d ranks)\n", size);
    MPI_Finalize();
    return failed ? 1 : 0;
}
