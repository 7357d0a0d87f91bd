/* multiseg.c - the multi-segment ping-pong of the NewMadeleine paper
 * (Aumage et al., section 5.2).
 *
 * mode=multiseg: each "ping" is 16 independent MPI_Isend of `size` bytes,
 * each on its own communicator (16 MPI_Comm_dup of MPI_COMM_WORLD made
 * beforehand) and from its own buffer; rank 1 receives them with 16
 * MPI_Irecv + MPI_Waitall and answers with the mirror image.  Rank 0
 * pre-posts its 16 receives before sending.  An implementation that
 * aggregates across communicators can pack a whole ping into one packet.
 *
 * mode=contig: reference, one message of 16 * size bytes on MPI_COMM_WORLD
 * (what perfect aggregation would cost on the wire).
 *
 * Sizes (per segment) 4 B .. 8 KiB.  Metric lat_us: half round-trip time,
 * lower is better.  Extra key total=<bytes per ping>.
 */
#include "common.h"

#define NSEG 16
#define MAX_SEG 8192L
#define TAG 31

static const long quick_sizes[] = {4, 64, 1024, 8192};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))

struct ctx {
    int rank;
    long n;
    int contig;
    MPI_Comm comms[NSEG];
    unsigned char *sbuf, *rbuf;
    MPI_Request reqs[2 * NSEG];
};

static void ping_op(void *p)
{
    struct ctx *c = p;
    size_t n = (size_t)c->n;
    if (c->rank > 1)
        return;
    int peer = 1 - c->rank;
    if (c->contig) {
        if (c->rank == 0) {
            MPI_Send(c->sbuf, NSEG * (int)n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
            MPI_Recv(c->rbuf, NSEG * (int)n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(c->rbuf, NSEG * (int)n, MPI_BYTE, 0, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(c->sbuf, NSEG * (int)n, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
        }
        return;
    }
    for (int k = 0; k < NSEG; k++)
        MPI_Irecv(c->rbuf + k * n, (int)n, MPI_BYTE, peer, TAG, c->comms[k],
                  &c->reqs[k]);
    if (c->rank == 1)
        bench_waitall(NSEG, c->reqs);
    for (int k = 0; k < NSEG; k++)
        MPI_Isend(c->sbuf + k * n, (int)n, MPI_BYTE, peer, TAG, c->comms[k],
                  &c->reqs[NSEG + k]);
    if (c->rank == 1)
        bench_waitall(NSEG, c->reqs + NSEG);
    else
        bench_waitall(2 * NSEG, c->reqs);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "multiseg",
                                     "multiseg|contig");
    int rank, nranks;
    double secs[BENCH_MAX_REPS];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "multiseg: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);

    long full[16];
    int nfull = 0;
    for (long n = 4; n <= MAX_SEG; n *= 2)
        full[nfull++] = n;
    const long *list = o.quick ? quick_sizes : full;
    int nlist = o.quick ? NQUICK : nfull;

    struct ctx c;
    c.rank = rank;
    for (int k = 0; k < NSEG; k++)
        MPI_Comm_dup(MPI_COMM_WORLD, &c.comms[k]);
    c.sbuf = bench_malloc(NSEG * MAX_SEG);
    c.rbuf = bench_malloc(NSEG * MAX_SEG);

    for (int contig = 0; contig <= 1; contig++) {
        const char *mode = contig ? "contig" : "multiseg";
        if (!bench_mode_on(&o, mode))
            continue;
        c.contig = contig;
        for (int i = 0; i < nlist; i++) {
            long n = list[i];
            if (!bench_size_on(&o, n))
                continue;
            c.n = n;
            bench_fill(c.sbuf, NSEG * n, n * 2 + rank);
            memset(c.rbuf, 0, NSEG * (size_t)n);
            MPI_Barrier(MPI_COMM_WORLD);
            ping_op(&c);
            if (rank <= 1) {
                long bad = bench_check(c.rbuf, NSEG * n, n * 2 + (1 - rank));
                if (bad >= 0)
                    bench_fail(&o, mode, n, bad);
            }

            long iters = bench_iters_for_size(&o, NSEG * n, 64.0 * 1048576,
                                              100, 5000);
            iters = bench_time_cap(&o, iters, ping_op, &c);
            bench_time_reps(&o, iters, ping_op, &c, secs);
            if (rank == 0) {
                char extra[64];
                snprintf(extra, sizeof extra, "segments=%d total=%ld",
                         contig ? 1 : NSEG, NSEG * n);
                bench_result(&o, mode, n, iters, "lat_us", "lower",
                             bench_us_per_op(secs, o.reps, 2 * iters), extra);
            }
        }
    }
    for (int k = 0; k < NSEG; k++)
        MPI_Comm_free(&c.comms[k]);
    free(c.sbuf);
    free(c.rbuf);
    bench_finish();
    return 0;
}
