/* indexed.c - ping-pong of derived datatypes (NewMadeleine paper, section
 * 5.3, and two everyday layouts).
 *
 * mode=indexed   one element of an MPI_Type_indexed of MPI_BYTE made of a
 *                64-byte block, a 1 KiB gap, then a large block (256 KiB;
 *                the full run also uses 16 KiB, 64 KiB and 1 MiB).  An
 *                engine that sends the small block with the rendezvous
 *                request of the large one and the large block zero-copy
 *                beats pack-and-send.  size = payload = 64 + large.
 * mode=indexed_contig  reference: one contiguous message of the same payload.
 * mode=indexed_pack    the same indexed type sent the way the paper says MPICH
 *                does it: packed into a contiguous buffer (MPI_Pack), sent
 *                as one message, received into a temporary buffer and
 *                unpacked (MPI_Unpack).  Only when asked with --mode (the
 *                networks part of the runner compares it with `indexed`).
 * mode=vector    one column of an N x N row-major array of doubles
 *                (MPI_Type_vector(N, 1, N, MPI_DOUBLE)), N = 64 .. 2048;
 *                size = 8 * N.
 * mode=struct    an array of `count` particles {int id; double pos[3];
 *                double vel[3]; char flag;} described by
 *                MPI_Type_create_struct + MPI_Type_create_resized;
 *                size = count * 53 (payload, padding excluded).
 *
 * Both ranks send from and receive into the same layout.  Before timing, one
 * exchange is checked: every byte the type covers must hold the sender's
 * pattern and every byte it does not cover must be untouched.  Metric
 * lat_us (half round trip, lower is better) and bw_MBps (payload / lat).
 */
#include "common.h"

#include <stddef.h>

#define TAG 41
#define GAP 1024L
#define SMALL 64L

struct particle {
    int id;
    double pos[3];
    double vel[3];
    char flag;
};

struct tcase {
    const char *mode;
    long size;          /* payload bytes */
    MPI_Datatype type;
    int count;
    size_t span;        /* bytes of buffer the message touches */
    long nblocks;
    long *off, *len;    /* the bytes the type covers, for checking */
    int pack;           /* send packed (MPI_Pack / MPI_Unpack), see indexed_pack */
    char extra[96];
};

struct ctx {
    int rank;
    const struct tcase *t;
    void *sbuf, *rbuf;
    void *packed; /* indexed_pack: the contiguous copy, psize bytes */
    int psize;
};

static void send_packed(struct ctx *c, int peer)
{
    int pos = 0;
    MPI_Pack(c->sbuf, c->t->count, c->t->type, c->packed, c->psize, &pos,
             MPI_COMM_WORLD);
    MPI_Send(c->packed, pos, MPI_PACKED, peer, TAG, MPI_COMM_WORLD);
}

static void recv_packed(struct ctx *c, int peer)
{
    int pos = 0;
    MPI_Recv(c->packed, c->psize, MPI_PACKED, peer, TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    MPI_Unpack(c->packed, c->psize, &pos, c->rbuf, c->t->count, c->t->type,
               MPI_COMM_WORLD);
}

static void ping_op(void *p)
{
    struct ctx *c = p;
    if (c->t->pack && c->rank <= 1) {
        if (c->rank == 0) {
            send_packed(c, 1);
            recv_packed(c, 1);
        } else {
            recv_packed(c, 0);
            send_packed(c, 0);
        }
        return;
    }
    if (c->rank == 0) {
        MPI_Send(c->sbuf, c->t->count, c->t->type, 1, TAG, MPI_COMM_WORLD);
        MPI_Recv(c->rbuf, c->t->count, c->t->type, 1, TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else if (c->rank == 1) {
        MPI_Recv(c->rbuf, c->t->count, c->t->type, 0, TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(c->sbuf, c->t->count, c->t->type, 0, TAG, MPI_COMM_WORLD);
    }
}

static void run_case(const struct bench_opts *o, int rank, struct tcase *t)
{
    double secs[BENCH_MAX_REPS];
    struct ctx c;
    c.rank = rank;
    c.t = t;
    c.sbuf = bench_malloc(t->span);
    c.rbuf = bench_malloc(t->span);
    c.psize = 0;
    if (t->pack)
        MPI_Pack_size(t->count, t->type, MPI_COMM_WORLD, &c.psize);
    c.packed = t->pack ? bench_malloc((size_t)c.psize) : NULL;

    bench_fill(c.sbuf, (long)t->span, t->size * 2 + rank);
    MPI_Barrier(MPI_COMM_WORLD);
    ping_op(&c);
    if (rank <= 1) {
        /* Expected: the peer's pattern on covered bytes, zero elsewhere. */
        unsigned char *want = bench_malloc(t->span);
        for (long b = 0; b < t->nblocks; b++)
            for (long i = t->off[b]; i < t->off[b] + t->len[b]; i++)
                want[i] = bench_byte(i, t->size * 2 + (1 - rank));
        const unsigned char *got = c.rbuf;
        for (size_t i = 0; i < t->span; i++)
            if (got[i] != want[i])
                bench_fail(o, t->mode, t->size, (long)i);
        free(want);
    }

    long iters = bench_iters_for_size(o, t->size, 64.0 * 1048576, 20, 5000);
    iters = bench_time_cap(o, iters, ping_op, &c);
    bench_time_reps(o, iters, ping_op, &c, secs);
    if (rank == 0) {
        struct bench_stats lat = bench_us_per_op(secs, o->reps, 2 * iters);
        bench_result(o, t->mode, t->size, iters, "lat_us", "lower", lat,
                     t->extra);
        bench_result(o, t->mode, t->size, iters, "bw_MBps", "higher",
                     bench_bw_of_lat(lat, (double)t->size), t->extra);
    }
    free(c.sbuf);
    free(c.rbuf);
    free(c.packed);
}

static void set_blocks(struct tcase *t, long n)
{
    t->nblocks = 0;
    t->off = bench_malloc((size_t)n * sizeof(long));
    t->len = bench_malloc((size_t)n * sizeof(long));
}

static void add_block(struct tcase *t, long off, long len)
{
    t->off[t->nblocks] = off;
    t->len[t->nblocks] = len;
    t->nblocks++;
}

static void free_case(struct tcase *t)
{
    if (t->type != MPI_BYTE)
        MPI_Type_free(&t->type);
    free(t->off);
    free(t->len);
}

static void run_indexed(const struct bench_opts *o, int rank, long large,
                        int contig, int pack)
{
    struct tcase t;
    t.mode = contig ? "indexed_contig" : pack ? "indexed_pack" : "indexed";
    t.pack = pack;
    t.size = SMALL + large;
    set_blocks(&t, 2);
    snprintf(t.extra, sizeof t.extra, "small=%ld gap=%ld large=%ld", SMALL,
             contig ? 0L : GAP, large);
    if (contig) {
        t.type = MPI_BYTE;
        t.count = (int)t.size;
        t.span = (size_t)t.size;
        add_block(&t, 0, t.size);
    } else {
        int lens[2] = {(int)SMALL, (int)large};
        int displs[2] = {0, (int)(SMALL + GAP)};
        MPI_Type_indexed(2, lens, displs, MPI_BYTE, &t.type);
        MPI_Type_commit(&t.type);
        t.count = 1;
        t.span = (size_t)(SMALL + GAP + large);
        add_block(&t, 0, SMALL);
        add_block(&t, SMALL + GAP, large);
    }
    run_case(o, rank, &t);
    free_case(&t);
}

static void run_vector(const struct bench_opts *o, int rank, long n)
{
    struct tcase t;
    t.mode = "vector";
    t.pack = 0;
    t.size = 8 * n;
    MPI_Type_vector((int)n, 1, (int)n, MPI_DOUBLE, &t.type);
    MPI_Type_commit(&t.type);
    t.count = 1;
    /* Column 0 of the whole matrix: the buffer is the matrix. */
    t.span = (size_t)(n * n * 8);
    set_blocks(&t, n);
    for (long i = 0; i < n; i++)
        add_block(&t, i * n * 8, 8);
    snprintf(t.extra, sizeof t.extra, "rows=%ld cols=%ld", n, n);
    run_case(o, rank, &t);
    free_case(&t);
}

static void run_struct(const struct bench_opts *o, int rank, long count)
{
    struct tcase t;
    int lens[4] = {1, 3, 3, 1};
    MPI_Aint displs[4] = {offsetof(struct particle, id),
                          offsetof(struct particle, pos),
                          offsetof(struct particle, vel),
                          offsetof(struct particle, flag)};
    MPI_Datatype types[4] = {MPI_INT, MPI_DOUBLE, MPI_DOUBLE, MPI_CHAR};
    MPI_Datatype tmp;
    MPI_Type_create_struct(4, lens, displs, types, &tmp);
    MPI_Type_create_resized(tmp, 0, (MPI_Aint)sizeof(struct particle),
                            &t.type);
    MPI_Type_free(&tmp);
    MPI_Type_commit(&t.type);
    t.mode = "struct";
    t.pack = 0;
    t.count = (int)count;
    t.size = count * (long)(sizeof(int) + 6 * sizeof(double) + 1);
    t.span = (size_t)count * sizeof(struct particle);
    set_blocks(&t, 4 * count);
    for (long e = 0; e < count; e++) {
        long base = e * (long)sizeof(struct particle);
        add_block(&t, base + (long)offsetof(struct particle, id), sizeof(int));
        add_block(&t, base + (long)offsetof(struct particle, pos),
                  3 * sizeof(double));
        add_block(&t, base + (long)offsetof(struct particle, vel),
                  3 * sizeof(double));
        add_block(&t, base + (long)offsetof(struct particle, flag), 1);
    }
    snprintf(t.extra, sizeof t.extra, "count=%ld extent=%zu", count,
             sizeof(struct particle));
    run_case(o, rank, &t);
    free_case(&t);
}

int main(int argc, char **argv)
{
    struct bench_opts o = bench_init(&argc, &argv, "indexed",
                                     "indexed|indexed_contig|indexed_pack|vector|struct");
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "indexed: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bench_header(&o);

    static const long larges[] = {16384, 65536, 262144, 1048576};
    static const long quick_larges[] = {262144};
    static const long vecs[] = {64, 256, 1024, 2048};
    static const long quick_vecs[] = {256, 2048};
    static const long structs[] = {1, 64, 1024, 16384};
    static const long quick_structs[] = {64, 16384};

    for (int contig = 0; contig <= 1; contig++) {
        if (!bench_mode_on(&o, contig ? "indexed_contig" : "indexed"))
            continue;
        const long *l = o.quick ? quick_larges : larges;
        int n = o.quick ? 1 : 4;
        for (int i = 0; i < n; i++)
            if (bench_size_on(&o, SMALL + l[i]))
                run_indexed(&o, rank, l[i], contig, 0);
    }
    /* Only when named: the main comparison's modes stay as they were. */
    if (o.mode != NULL && strcmp(o.mode, "indexed_pack") == 0) {
        const long *l = o.quick ? quick_larges : larges;
        int n = o.quick ? 1 : 4;
        for (int i = 0; i < n; i++)
            if (bench_size_on(&o, SMALL + l[i]))
                run_indexed(&o, rank, l[i], 0, 1);
    }
    if (bench_mode_on(&o, "vector")) {
        const long *l = o.quick ? quick_vecs : vecs;
        int n = o.quick ? 2 : 4;
        for (int i = 0; i < n; i++)
            if (bench_size_on(&o, 8 * l[i]))
                run_vector(&o, rank, l[i]);
    }
    if (bench_mode_on(&o, "struct")) {
        const long *l = o.quick ? quick_structs : structs;
        int n = o.quick ? 2 : 4;
        for (int i = 0; i < n; i++)
            if (bench_size_on(&o, 53 * l[i]))
                run_struct(&o, rank, l[i]);
    }
    bench_finish();
    return 0;
}
