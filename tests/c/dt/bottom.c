/* bottom.c - MPI_BOTTOM with absolute addresses: a struct type whose
 * displacements come from MPI_Get_address, over three separately allocated
 * arrays (a header, a large payload and a trailer), sent and received with
 * MPI_BOTTOM as the buffer, small and large (the payload crosses the
 * rendezvous threshold and goes per block).  Also: received into a
 * contiguous buffer, sent from a contiguous buffer into MPI_BOTTOM, packed
 * and unpacked from MPI_BOTTOM, and MPI_Aint_add/MPI_Aint_diff.
 *
 * 1 or 2 ranks (with 1 rank, everything goes to itself). */
#include "../p2p/common.h"

typedef struct {
    int *head;      /* 3 ints */
    double *body;   /* n doubles */
    char *tail;     /* 5 chars */
    long n;
    MPI_Datatype t; /* struct of absolute addresses */
} parts;

static parts parts_new(long n)
{
    parts p;
    p.n = n;
    p.head = (int *)xmalloc(3 * sizeof(int));
    p.body = (double *)xmalloc((size_t)n * sizeof(double));
    p.tail = (char *)xmalloc(5);
    int bl[3] = {3, (int)n, 5};
    MPI_Aint dp[3];
    MPI_OK(MPI_Get_address(p.head, &dp[0]));
    MPI_OK(MPI_Get_address(p.body, &dp[1]));
    MPI_OK(MPI_Get_address(p.tail, &dp[2]));
    CHECK(dp[0] == (MPI_Aint)(uintptr_t)p.head);
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_OK(MPI_Type_create_struct(3, bl, dp, ty, &p.t));
    MPI_OK(MPI_Type_commit(&p.t));
    return p;
}

static void parts_fill(parts *p, int who, int salt)
{
    for (int i = 0; i < 3; i++)
        p->head[i] = 1000 * who + 10 * salt + i;
    for (long i = 0; i < p->n; i++)
        p->body[i] = (double)i * 0.5 + who * 1e6 + salt;
    for (int i = 0; i < 5; i++)
        p->tail[i] = (char)('a' + i + who + salt);
}

static void parts_clear(parts *p)
{
    memset(p->head, 0, 3 * sizeof(int));
    memset(p->body, 0, (size_t)p->n * sizeof(double));
    memset(p->tail, 0, 5);
}

static void parts_check(const parts *p, int who, int salt, const char *what)
{
    for (int i = 0; i < 3; i++)
        CHECKF(p->head[i] == 1000 * who + 10 * salt + i, "%s: head[%d] = %d", what, i, p->head[i]);
    for (long i = 0; i < p->n; i++)
        CHECKF(p->body[i] == (double)i * 0.5 + who * 1e6 + salt, "%s: body[%ld] = %g", what, i,
               p->body[i]);
    for (int i = 0; i < 5; i++)
        CHECKF(p->tail[i] == (char)('a' + i + who + salt), "%s: tail[%d] = %d", what, i, p->tail[i]);
}

static void parts_free(parts *p)
{
    MPI_OK(MPI_Type_free(&p->t));
    free(p->head);
    free(p->body);
    free(p->tail);
}

/* The contiguous image of the parts: 3 ints, n doubles, 5 chars, as a struct type over one
 * buffer (no gaps). */
static MPI_Datatype image_type(long n, size_t *bytes)
{
    int bl[3] = {3, (int)n, 5};
    MPI_Aint dp[3] = {0, 12, 12 + 8 * (MPI_Aint)n};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Datatype t, r;
    MPI_OK(MPI_Type_create_struct(3, bl, dp, ty, &t));
    *bytes = (size_t)(17 + 8 * n);
    MPI_OK(MPI_Type_create_resized(t, 0, (MPI_Aint)*bytes, &r));
    MPI_OK(MPI_Type_free(&t));
    MPI_OK(MPI_Type_commit(&r));
    return r;
}

/* Pack from MPI_BOTTOM, unpack into MPI_BOTTOM.  (MPICH 4.0 rejects a NULL inbuf in
 * MPI_Pack although MPI_BOTTOM is a valid buffer: run for madmpi only.) */
static void pack_at_bottom(parts *s, parts *r, size_t bytes, int salt)
{
    int psize = 0;
    MPI_OK(MPI_Pack_size(1, s->t, MPI_COMM_WORLD, &psize));
    CHECK(psize >= (int)bytes);
    unsigned char *packed = (unsigned char *)xmalloc((size_t)psize);
    int pos = 0;
    MPI_OK(MPI_Pack(MPI_BOTTOM, 1, s->t, packed, psize, &pos, MPI_COMM_WORLD));
    CHECK(pos == (int)bytes);
    parts_clear(r);
    int upos = 0;
    MPI_OK(MPI_Unpack(packed, pos, &upos, MPI_BOTTOM, 1, r->t, MPI_COMM_WORLD));
    CHECK(upos == pos);
    parts_check(r, t_rank, salt, "pack/unpack at MPI_BOTTOM");
    free(packed);
}

static void one(long n, int salt)
{
    int other = (t_rank + 1) % t_size;
    parts s = parts_new(n), r = parts_new(n);
    MPI_Request q;

    /* MPI_BOTTOM to MPI_BOTTOM */
    parts_fill(&s, t_rank, salt);
    parts_clear(&r);
    MPI_OK(MPI_Irecv(MPI_BOTTOM, 1, r.t, other, 1, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(MPI_BOTTOM, 1, s.t, other, 1, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    parts_check(&r, other, salt, "bottom -> bottom");

    /* to itself */
    parts_clear(&r);
    MPI_OK(MPI_Irecv(MPI_BOTTOM, 1, r.t, t_rank, 2, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(MPI_BOTTOM, 1, s.t, t_rank, 2, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    parts_check(&r, t_rank, salt, "bottom -> bottom (self)");

    /* MPI_BOTTOM to a contiguous image, and back */
    size_t bytes;
    MPI_Datatype img = image_type(n, &bytes);
    unsigned char *buf = (unsigned char *)xmalloc(bytes);
    memset(buf, 0, bytes);
    MPI_Status st;
    MPI_OK(MPI_Irecv(buf, 1, img, other, 3, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(MPI_BOTTOM, 1, s.t, other, 3, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q, &st));
    int count = -1;
    MPI_OK(MPI_Get_count(&st, img, &count));
    CHECK(count == 1);
    for (int i = 0; i < 3; i++) {
        int v;
        memcpy(&v, buf + 4 * i, 4);
        CHECKF(v == 1000 * other + 10 * salt + i, "image head[%d] = %d", i, v);
    }
    for (long i = 0; i < n; i += 997) {
        double v;
        memcpy(&v, buf + 12 + 8 * i, 8);
        CHECKF(v == (double)i * 0.5 + other * 1e6 + salt, "image body[%ld] = %g", i, v);
    }
    CHECK(buf[12 + 8 * n] == (unsigned char)('a' + other + salt));

    parts_clear(&r);
    MPI_OK(MPI_Irecv(MPI_BOTTOM, 1, r.t, other, 4, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(buf, 1, img, other, 4, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    parts_check(&r, t_rank, salt, "image -> bottom");

    if (is_madmpi())
        pack_at_bottom(&s, &r, bytes, salt);
    free(buf);
    MPI_OK(MPI_Type_free(&img));
    parts_free(&s);
    parts_free(&r);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size <= 2);
    int a[4];
    MPI_Aint a0, a3;
    MPI_OK(MPI_Get_address(&a[0], &a0));
    MPI_OK(MPI_Get_address(&a[3], &a3));
    CHECK(MPI_Aint_diff(a3, a0) == 3 * (MPI_Aint)sizeof(int));
    CHECK(MPI_Aint_add(a0, 3 * (MPI_Aint)sizeof(int)) == a3);
    one(100, 1);
    one(300000, 2);
    t_done("bottom");
    return 0;
}
