/* constructors.c - every type constructor used in point-to-point, below and
 * above the eager/rendezvous threshold (the large cases move 1 MiB and more).
 *
 * Each case names a send type and a receive type together with their
 * layouts written out by hand.  Both ranks send their pattern to the other
 * rank and receive the other's; then every rank also sends to itself.  The
 * receive buffer must equal a reference built from the layouts alone: the
 * i-th byte of the sent type map lands on the i-th byte of the receive type
 * map, and every other byte keeps its sentinel value.  Also checked:
 * Get_count and Get_elements, and that a type freed while a send or a
 * receive uses it stays valid until the operation completes.
 *
 * 1 rank (send-to-self only) or 2 ranks. */
#include "../p2p/common.h"
#include <stddef.h>

#define MAXB 8

/* The memory of one element: `reps` repetitions, `rstride` bytes apart, of the blocks
 * (disp[i], len[i]) in this order; consecutive elements are `extent` bytes apart. */
typedef struct {
    int n;
    long disp[MAXB];
    long len[MAXB];
    long reps;
    long rstride;
    long extent;
    long elems; /* basic elements in one element */
} layout;

static long lay_size(const layout *l)
{
    long s = 0;
    for (int i = 0; i < l->n; i++)
        s += l->len[i];
    return s * l->reps;
}

/* A cursor over the data bytes of `count` elements, in type-map order. */
typedef struct {
    const layout *l;
    long count;
    long e, r;
    int b;
    long off; /* bytes consumed in the current block */
} cursor;

/* Offset of the next run of at most `max` bytes; its length in *n (0 at the end). */
static long cur_next(cursor *c, long max, long *n)
{
    const layout *l = c->l;
    while (c->e < c->count && c->off == l->len[c->b]) {
        c->off = 0;
        if (++c->b == l->n) {
            c->b = 0;
            if (++c->r == l->reps) {
                c->r = 0;
                c->e++;
            }
        }
    }
    if (c->e >= c->count) {
        *n = 0;
        return 0;
    }
    long left = l->len[c->b] - c->off;
    *n = left < max ? left : max;
    long at = c->e * l->extent + c->r * l->rstride + l->disp[c->b] + c->off;
    c->off += *n;
    return at;
}

/* Bytes [lo, hi) that `count` elements touch, relative to the buffer. */
static void lay_span(const layout *l, long count, long *lo, long *hi)
{
    cursor c = {l, count, 0, 0, 0, 0};
    *lo = 0;
    *hi = 0;
    for (;;) {
        long n;
        long at = cur_next(&c, 1L << 40, &n);
        if (n == 0)
            return;
        if (at < *lo)
            *lo = at;
        if (at + n > *hi)
            *hi = at + n;
    }
}

/* The reference: the data of `scount` elements of `sl` at `src` copied into `rcount`
 * elements of `rl` at `dst`, byte i of the stream to byte i of the stream. */
static void reference(const unsigned char *src, const layout *sl, long scount, unsigned char *dst,
                      const layout *rl, long rcount)
{
    cursor s = {sl, scount, 0, 0, 0, 0}, r = {rl, rcount, 0, 0, 0, 0};
    for (;;) {
        long rn, sn;
        long ro = cur_next(&r, 1L << 40, &rn);
        if (rn == 0)
            return;
        long so = cur_next(&s, rn, &sn);
        if (sn == 0)
            return;
        r.off -= rn - sn; /* the rest of this receive run comes from the next send run */
        memcpy(dst + ro, src + so, (size_t)sn);
    }
}

/* A buffer covering `count` elements of `l`, with slack on each side. */
typedef struct {
    unsigned char *mem;
    unsigned char *base; /* the buffer argument: mem + MARGIN - lo */
    size_t size;
} buffer;

enum { MARGIN = 64 };

static buffer buf_new(const layout *l, long count)
{
    long lo, hi;
    lay_span(l, count, &lo, &hi);
    buffer b;
    b.size = (size_t)(hi - lo) + 2 * MARGIN;
    b.mem = (unsigned char *)xmalloc(b.size);
    b.base = b.mem + MARGIN - lo;
    return b;
}

/* One side of a transfer: `count` elements of `t`, whose memory is `lcount` elements of
 * `l` (one MPI element may be described as several layout elements). */
typedef struct {
    MPI_Datatype t;
    int count;
    layout l;
    long lcount;
} side;

static long g_case = 0;

/* Send `s` to `to` and receive `r` from `from`, then check. */
static void exchange(const char *name, const side *s, const side *r, int to, int from)
{
    g_case++;
    buffer sb = buf_new(&s->l, s->lcount), rb = buf_new(&r->l, r->lcount),
           want = buf_new(&r->l, r->lcount), peer = buf_new(&s->l, s->lcount);
    fill(sb.mem, sb.size, (unsigned)t_rank, (unsigned)g_case);
    fill(peer.mem, peer.size, (unsigned)from, (unsigned)g_case);
    memset(rb.mem, 0xEE, rb.size);
    memset(want.mem, 0xEE, want.size);
    reference(peer.base, &s->l, s->lcount, want.base, &r->l, r->lcount);

    MPI_Request req;
    MPI_Status st;
    MPI_OK(MPI_Irecv(rb.base, r->count, r->t, from, 7, MPI_COMM_WORLD, &req));
    MPI_OK(MPI_Send(sb.base, s->count, s->t, to, 7, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&req, &st));

    for (size_t i = 0; i < rb.size; i++)
        CHECKF(rb.mem[i] == want.mem[i],
               "%s (from %d): byte %ld of the receive buffer is %#x, expected %#x", name, from,
               (long)i - MARGIN + (long)(rb.mem + MARGIN - rb.base), rb.mem[i], want.mem[i]);
    long bytes = s->lcount * lay_size(&s->l);
    long rsize = r->lcount * lay_size(&r->l) / r->count; /* bytes of one receive element */
    int count = -1;
    MPI_OK(MPI_Get_count(&st, r->t, &count));
    if (bytes % rsize == 0)
        CHECKF(count == (int)(bytes / rsize), "%s: Get_count %d, expected %ld", name, count,
               bytes / rsize);
    else
        CHECKF(count == MPI_UNDEFINED, "%s: Get_count %d, expected MPI_UNDEFINED", name, count);
    MPI_Count elems = -1;
    MPI_OK(MPI_Get_elements_x(&st, r->t, &elems));
    CHECKF(elems == s->lcount * s->l.elems, "%s: Get_elements_x %ld, expected %ld", name,
           (long)elems, s->lcount * s->l.elems);
    free(sb.mem);
    free(rb.mem);
    free(want.mem);
    free(peer.mem);
}

/* The case with the other rank, then with itself. */
static void run(const char *name, const side *s, const side *r)
{
    int other = (t_rank + 1) % t_size;
    exchange(name, s, r, other, other);
    exchange(name, s, r, t_rank, t_rank);
}

static MPI_Datatype committed(MPI_Datatype t)
{
    MPI_OK(MPI_Type_commit(&t));
    return t;
}

/* One block of `len` bytes per element of `extent` bytes. */
static layout block(long len, long extent, long elems)
{
    layout l;
    memset(&l, 0, sizeof l);
    l.n = 1;
    l.len[0] = len;
    l.reps = 1;
    l.extent = extent;
    l.elems = elems;
    return l;
}

static side basic(MPI_Datatype t, long size, long count)
{
    side s = {t, (int)count, block(size, size, 1), count};
    return s;
}

static const char *big(long n, long limit)
{
    return n > limit ? " (large)" : " (small)";
}

/* ---------------------------------------------------------------- cases */

static void contiguous(long n)
{
    MPI_Datatype t = MPI_DATATYPE_NULL;
    MPI_OK(MPI_Type_contiguous((int)n, MPI_INT, &t));
    committed(t);
    side c1 = {t, 1, block(4 * n, 4 * n, n), 1};
    side c2 = {t, 2, block(4 * n, 4 * n, n), 2};
    side ints = basic(MPI_INT, 4, n);
    char name[128];
    snprintf(name, sizeof name, "contiguous -> int%s", big(n, 4096));
    run(name, &c1, &ints);
    run("int -> contiguous", &ints, &c1);
    run("contiguous x2", &c2, &c2);
    MPI_OK(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL);
}

/* rows blocks of 2 doubles out of 5: a vector sent, contiguous received, and the reverse;
 * and a vector received into a vector. */
static void vector(long rows)
{
    MPI_Datatype v;
    MPI_OK(MPI_Type_vector((int)rows, 2, 5, MPI_DOUBLE, &v));
    committed(v);
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(v, &lb, &ext));
    CHECK(lb == 0 && ext == (rows - 1) * 40 + 16);
    /* one vector = `rows` elements of one 16-byte block with a 40-byte extent */
    side vs = {v, 1, block(16, 40, 2), rows};
    side ds = basic(MPI_DOUBLE, 8, 2 * rows);
    char name[128];
    snprintf(name, sizeof name, "vector -> double%s", big(rows * 16, 16384));
    run(name, &vs, &ds);
    run("double -> vector", &ds, &vs);
    run("vector -> vector", &vs, &vs);
    MPI_OK(MPI_Type_free(&v));
}

/* Three columns of a rows x cols matrix of doubles, with a column type resized to one
 * double, received into columns 0..2 of another matrix with `rcols` columns. */
static void columns(long rows, long cols, long rcols)
{
    MPI_Datatype col, scol, rcol, rcol0;
    MPI_OK(MPI_Type_vector((int)rows, 1, (int)cols, MPI_DOUBLE, &col));
    MPI_OK(MPI_Type_create_resized(col, 0, sizeof(double), &scol));
    MPI_OK(MPI_Type_free(&col));
    committed(scol);
    MPI_OK(MPI_Type_vector((int)rows, 1, (int)rcols, MPI_DOUBLE, &rcol0));
    MPI_OK(MPI_Type_create_resized(rcol0, 0, sizeof(double), &rcol));
    MPI_OK(MPI_Type_free(&rcol0));
    committed(rcol);
    layout ls = block(8, 8, 1), lr = block(8, 8, 1);
    /* element = a column: `rows` reps of one double, a row apart; extent one double */
    ls.reps = rows;
    ls.rstride = cols * 8;
    ls.elems = rows;
    lr.reps = rows;
    lr.rstride = rcols * 8;
    lr.elems = rows;
    side s = {scol, 3, ls, 3}, r = {rcol, 3, lr, 3};
    side d = basic(MPI_DOUBLE, 8, 3 * rows);
    char name[128];
    snprintf(name, sizeof name, "columns -> columns%s", big(rows * 24, 16384));
    run(name, &s, &r);
    run("columns -> double", &s, &d);
    run("double -> columns", &d, &r);
    MPI_OK(MPI_Type_free(&scol));
    MPI_OK(MPI_Type_free(&rcol));
}

/* hvector of `nb` blocks of `bl` ints, `stride` bytes apart: large blocks go zero-copy. */
static void hvector(long nb, long bl, long stride, int count)
{
    MPI_Datatype h;
    MPI_OK(MPI_Type_create_hvector((int)nb, (int)bl, stride, MPI_INT, &h));
    committed(h);
    long ext = (nb - 1) * stride + 4 * bl;
    /* an element: nb reps of one block, `stride` apart */
    side hs = {h, count, block(4 * bl, ext, nb * bl), count};
    hs.l.reps = nb;
    hs.l.rstride = stride;
    side ints = basic(MPI_INT, 4, nb * bl * count);
    char name[128];
    snprintf(name, sizeof name, "hvector -> hvector%s", big(nb * bl * 4 * count, 16384));
    run(name, &hs, &hs);
    run("hvector -> int", &hs, &ints);
    run("int -> hvector", &ints, &hs);
    MPI_OK(MPI_Type_free(&h));
}

/* The paper's case (NewMadeleine, section 5.3): an indexed type of a 64-byte block and a
 * `large`-byte block, received into contiguous memory and into the same type. */
static void indexed_paper(long large, int count)
{
    MPI_Datatype t;
    int bl[2] = {8, (int)(large / 8)};
    int dp[2] = {0, 16}; /* in doubles: a 64-byte hole after the small block */
    MPI_OK(MPI_Type_indexed(2, bl, dp, MPI_DOUBLE, &t));
    committed(t);
    layout l;
    memset(&l, 0, sizeof l);
    l.n = 2;
    l.disp[0] = 0;
    l.len[0] = 64;
    l.disp[1] = 128;
    l.len[1] = large;
    l.reps = 1;
    l.extent = 128 + large;
    l.elems = 8 + large / 8;
    side s = {t, count, l, count};
    side d = basic(MPI_DOUBLE, 8, (8 + large / 8) * count);
    char name[128];
    snprintf(name, sizeof name, "indexed 64 B + %ld B -> contiguous", large);
    run(name, &s, &d);
    snprintf(name, sizeof name, "indexed 64 B + %ld B -> indexed", large);
    run(name, &s, &s);
    run("contiguous -> indexed", &d, &s);
    MPI_OK(MPI_Type_free(&t));
}

/* hindexed with unsorted displacements: the stream follows the given order. */
static void hindexed(long scale, int count)
{
    MPI_Datatype t;
    int bl[3] = {3, (int)(100 * scale), 1};
    MPI_Aint dp[3] = {(MPI_Aint)(400 * scale + 64), 0, (MPI_Aint)(400 * scale + 32)};
    MPI_OK(MPI_Type_create_hindexed(3, bl, dp, MPI_INT, &t));
    committed(t);
    layout l;
    memset(&l, 0, sizeof l);
    l.n = 3;
    for (int i = 0; i < 3; i++) {
        l.disp[i] = dp[i];
        l.len[i] = 4L * bl[i];
    }
    l.reps = 1;
    l.extent = 400 * scale + 76;
    l.elems = 4 + 100 * scale;
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECKF(lb == 0 && ext == l.extent, "hindexed extent %ld, expected %ld", (long)ext, l.extent);
    side s = {t, count, l, count};
    side d = basic(MPI_INT, 4, l.elems * count);
    char name[128];
    snprintf(name, sizeof name, "hindexed -> hindexed%s", big(l.elems * 4 * count, 16384));
    run(name, &s, &s);
    run("hindexed -> int", &s, &d);
    MPI_OK(MPI_Type_free(&t));
}

/* indexed_block (in doubles) and hindexed_block (in bytes, ints), unsorted. */
static void indexed_blocks(long bl, int count)
{
    MPI_Datatype ib, hb;
    int dpi[4] = {0, (int)(3 * bl), (int)bl + 1, (int)(5 * bl)};
    MPI_OK(MPI_Type_create_indexed_block(4, (int)bl, dpi, MPI_DOUBLE, &ib));
    committed(ib);
    layout li;
    memset(&li, 0, sizeof li);
    li.n = 4;
    for (int i = 0; i < 4; i++) {
        li.disp[i] = 8L * dpi[i];
        li.len[i] = 8 * bl;
    }
    li.reps = 1;
    li.extent = 8 * 6 * bl;
    li.elems = 4 * bl;
    side si = {ib, count, li, count};
    side di = basic(MPI_DOUBLE, 8, 4 * bl * count);
    char name[128];
    snprintf(name, sizeof name, "indexed_block -> indexed_block%s", big(32 * bl * count, 16384));
    run(name, &si, &si);
    run("indexed_block -> double", &si, &di);

    MPI_Aint dph[3] = {(MPI_Aint)(8 * bl + 100), 0, (MPI_Aint)(4 * bl + 48)};
    MPI_OK(MPI_Type_create_hindexed_block(3, (int)bl, dph, MPI_INT, &hb));
    committed(hb);
    layout lh;
    memset(&lh, 0, sizeof lh);
    lh.n = 3;
    for (int i = 0; i < 3; i++) {
        lh.disp[i] = dph[i];
        lh.len[i] = 4 * bl;
    }
    lh.reps = 1;
    lh.extent = 12 * bl + 100;
    lh.elems = 3 * bl;
    side sh = {hb, count, lh, count};
    side dh = basic(MPI_INT, 4, 3 * bl * count);
    snprintf(name, sizeof name, "hindexed_block -> hindexed_block%s", big(12 * bl * count, 16384));
    run(name, &sh, &sh);
    run("int -> hindexed_block", &dh, &sh);
    MPI_OK(MPI_Type_free(&ib));
    MPI_OK(MPI_Type_free(&hb));
}

/* A C struct with gaps, as an array; received into the same type and into a packed
 * layout of the same fields (a struct type resized to the packed size). */
struct rec {
    char c;
    double d;
    int i[3];
    short s;
};

static void structs(long n)
{
    MPI_Datatype t, packed, p0;
    int bl[4] = {1, 1, 3, 1};
    MPI_Aint dp[4] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i),
                      offsetof(struct rec, s)};
    MPI_Datatype ty[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
    MPI_OK(MPI_Type_create_struct(4, bl, dp, ty, &t));
    committed(t);
    MPI_Aint lb, ext;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECKF(lb == 0 && ext == (MPI_Aint)sizeof(struct rec), "struct extent %ld, expected %zu",
           (long)ext, sizeof(struct rec));
    int size = 0;
    MPI_OK(MPI_Type_size(t, &size));
    CHECK(size == 1 + 8 + 12 + 2);
    layout l;
    memset(&l, 0, sizeof l);
    l.n = 4;
    long lens[4] = {1, 8, 12, 2};
    for (int i = 0; i < 4; i++) {
        l.disp[i] = dp[i];
        l.len[i] = lens[i];
    }
    l.reps = 1;
    l.extent = sizeof(struct rec);
    l.elems = 6;

    MPI_Aint pdp[4] = {0, 1, 9, 21};
    MPI_OK(MPI_Type_create_struct(4, bl, pdp, ty, &p0));
    MPI_OK(MPI_Type_create_resized(p0, 0, 23, &packed));
    MPI_OK(MPI_Type_free(&p0));
    committed(packed);
    layout lp = l;
    for (int i = 0; i < 4; i++)
        lp.disp[i] = pdp[i];
    lp.extent = 23;

    side s = {t, (int)n, l, n}, p = {packed, (int)n, lp, n};
    char name[128];
    snprintf(name, sizeof name, "struct -> struct%s", big(23 * n, 16384));
    run(name, &s, &s);
    run("struct -> packed struct", &s, &p);
    run("packed struct -> struct", &p, &s);
    MPI_OK(MPI_Type_free(&t));
    MPI_OK(MPI_Type_free(&packed));
}

/* A type with a negative lower bound: ints at -8 and at 4..12, resized to lb -8, extent 24.
 * The buffer argument points into the middle of the memory. */
static void negative_lb(long n)
{
    MPI_Datatype h, t;
    int bl[2] = {1, 2};
    MPI_Aint dp[2] = {-8, 4};
    MPI_OK(MPI_Type_create_hindexed(2, bl, dp, MPI_INT, &h));
    MPI_OK(MPI_Type_create_resized(h, -8, 24, &t));
    MPI_OK(MPI_Type_free(&h));
    committed(t);
    MPI_Aint lb, ext, tlb, text;
    MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
    MPI_OK(MPI_Type_get_true_extent(t, &tlb, &text));
    CHECK(lb == -8 && ext == 24 && tlb == -8 && text == 20);
    layout l;
    memset(&l, 0, sizeof l);
    l.n = 2;
    l.disp[0] = -8;
    l.len[0] = 4;
    l.disp[1] = 4;
    l.len[1] = 8;
    l.reps = 1;
    l.extent = 24;
    l.elems = 3;
    side s = {t, (int)n, l, n};
    side d = basic(MPI_INT, 4, 3 * n);
    char name[128];
    snprintf(name, sizeof name, "negative lb -> negative lb%s", big(12 * n, 16384));
    run(name, &s, &s);
    run("negative lb -> int", &s, &d);
    run("int -> negative lb", &d, &s);
    MPI_OK(MPI_Type_free(&t));
}

/* dup of contiguous(2, vector(3, 1, 2, int)), committed through the dup only; and a struct
 * of that with a char, nested two levels. */
static void nested(long n)
{
    MPI_Datatype v, c, d, st;
    MPI_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &v));
    MPI_OK(MPI_Type_contiguous(2, v, &c));
    MPI_OK(MPI_Type_dup(c, &d));
    committed(d);
    layout l;
    memset(&l, 0, sizeof l);
    l.n = 3;
    for (int i = 0; i < 3; i++) {
        l.disp[i] = 8 * i;
        l.len[i] = 4;
    }
    l.reps = 2;
    l.rstride = 20;
    l.extent = 40;
    l.elems = 6;
    side s = {d, (int)n, l, n};
    side ints = basic(MPI_INT, 4, 6 * n);
    char name[128];
    snprintf(name, sizeof name, "dup(contiguous(vector)) -> same%s", big(24 * n, 16384));
    run(name, &s, &s);
    run("int -> dup(contiguous(vector))", &ints, &s);

    int bl[2] = {1, 2};
    MPI_Aint dp[2] = {0, 48};
    MPI_Datatype ty[2] = {c, MPI_CHAR};
    MPI_OK(MPI_Type_create_struct(2, bl, dp, ty, &st));
    committed(st);
    layout ls;
    memset(&ls, 0, sizeof ls);
    ls.n = 7;
    for (int i = 0; i < 6; i++) {
        ls.disp[i] = (i / 3) * 20 + 8 * (i % 3);
        ls.len[i] = 4;
    }
    ls.disp[6] = 48;
    ls.len[6] = 2;
    ls.reps = 1;
    ls.extent = 52; /* 50 bytes padded to the int alignment */
    ls.elems = 8;
    side ss = {st, (int)n, ls, n};
    run("struct(contiguous(vector), char) -> same", &ss, &ss);
    MPI_OK(MPI_Type_free(&v));
    MPI_OK(MPI_Type_free(&c));
    MPI_OK(MPI_Type_free(&d));
    MPI_OK(MPI_Type_free(&st));
}

/* A type freed right after the operations that use it started: they still complete. */
static void freed_while_in_use(long rows)
{
    int other = (t_rank + 1) % t_size;
    MPI_Datatype sv, rv;
    MPI_OK(MPI_Type_vector((int)rows, 2, 5, MPI_DOUBLE, &sv));
    committed(sv);
    MPI_OK(MPI_Type_dup(sv, &rv));
    long n = (rows - 1) * 5 + 2;
    double *s = (double *)xmalloc((size_t)n * sizeof(double));
    double *r = (double *)xmalloc((size_t)n * sizeof(double));
    for (long i = 0; i < n; i++) {
        s[i] = (double)(i + 1000 * t_rank);
        r[i] = -1.0;
    }
    MPI_Request q[2];
    MPI_OK(MPI_Irecv(r, 1, rv, other, 9, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Type_free(&rv));
    MPI_OK(MPI_Isend(s, 1, sv, other, 9, MPI_COMM_WORLD, &q[1]));
    MPI_OK(MPI_Type_free(&sv));
    MPI_Status sts[2];
    MPI_OK(MPI_Waitall(2, q, sts));
    for (long i = 0; i < n; i++) {
        double want = (i % 5) < 2 ? (double)(i + 1000 * other) : -1.0;
        CHECKF(r[i] == want, "freed-while-in-use: r[%ld] = %g, expected %g", i, r[i], want);
    }
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size <= 2);
    contiguous(1000);
    contiguous(300000);
    vector(100);
    vector(80000);
    columns(64, 16, 5);
    columns(60000, 8, 3);
    hvector(4, 16, 100, 2);
    hvector(16, 8192, 40000, 3);
    indexed_paper(192, 2);
    indexed_paper(256 * 1024, 4);
    hindexed(1, 3);
    hindexed(3000, 2);
    indexed_blocks(3, 5);
    indexed_blocks(40000, 2);
    structs(10);
    structs(60000);
    negative_lb(10);
    negative_lb(100000);
    nested(5);
    nested(60000);
    freed_while_in_use(10);
    freed_while_in_use(100000);
    t_done("constructors");
    return 0;
}
