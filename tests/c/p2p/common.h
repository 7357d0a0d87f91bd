/* common.h - helpers shared by the point-to-point test programs.
 *
 * Every test is self-checking: a failed check prints one line naming the
 * file, line and condition on stderr and aborts the whole job with
 * MPI_Abort, so the harness sees a non-zero exit.  A passing program has
 * rank 0 print "OK <name>" as its last line.
 */
#ifndef MADMPI_P2P_COMMON_H
#define MADMPI_P2P_COMMON_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_rank = -1;
static int t_size = -1;

#define FAILF(...)                                                            \
    do {                                                                      \
        fprintf(stderr, "FAIL rank %d %s:%d: ", t_rank, __FILE__, __LINE__);  \
        fprintf(stderr, __VA_ARGS__);                                         \
        fprintf(stderr, "\n");                                                \
        fflush(stderr);                                                       \
        MPI_Abort(MPI_COMM_WORLD, 3);                                         \
        exit(3);                                                              \
    } while (0)

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            FAILF("check failed: %s", #cond);                                 \
    } while (0)

#define CHECKF(cond, ...)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "FAIL rank %d %s:%d: check failed: %s: ", t_rank, \
                    __FILE__, __LINE__, #cond);                               \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            fflush(stderr);                                                   \
            MPI_Abort(MPI_COMM_WORLD, 3);                                     \
            exit(3);                                                          \
        }                                                                     \
    } while (0)

/* Run an MPI call that must succeed. */
#define MPI_OK(call)                                                          \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != MPI_SUCCESS) {                                             \
            char s_[MPI_MAX_ERROR_STRING];                                    \
            int l_ = 0;                                                       \
            s_[0] = 0;                                                        \
            MPI_Error_string(rc_, s_, &l_);                                   \
            FAILF("%s returned %d (%s)", #call, rc_, s_);                     \
        }                                                                     \
    } while (0)

/* The error class of a return code. */
static inline int err_class(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

/* Check that `call` fails with error class `cls` (errors must return). */
#define EXPECT_CLASS(call, cls)                                               \
    do {                                                                      \
        int rc_ = (call);                                                     \
        int c_ = err_class(rc_);                                              \
        if (c_ != (cls)) {                                                    \
            char s_[MPI_MAX_ERROR_STRING];                                    \
            int l_ = 0;                                                       \
            s_[0] = 0;                                                        \
            MPI_Error_string(rc_, s_, &l_);                                   \
            FAILF("%s: expected class %s (%d), got rc %d class %d (%s)",      \
                  #call, #cls, (int)(cls), rc_, c_, s_);                      \
        }                                                                     \
    } while (0)

static inline void t_init(int *argc, char ***argv)
{
    MPI_OK(MPI_Init(argc, argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
}

/* Whether the library under test is madmpi (some checks are about its
 * documented choices where the standard leaves freedom). */
static inline int is_madmpi(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strncmp(v, "madmpi", 6) == 0;
}

/* MPI_Init_thread asking for MPI_THREAD_MULTIPLE. Returns 1 when it is
 * provided; otherwise (allowed for another MPI, never for madmpi) prints that
 * test `name` is skipped, finalizes and returns 0: the caller then returns 0. */
static inline int t_init_multiple(int *argc, char ***argv, const char *name)
{
    int provided = -1;
    MPI_OK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    if (provided >= MPI_THREAD_MULTIPLE)
        return 1;
    CHECK(!is_madmpi());
    if (t_rank == 0)
        printf("OK %s (skipped: no MPI_THREAD_MULTIPLE)\n", name);
    MPI_Finalize();
    return 0;
}

static inline void t_done(const char *name)
{
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        printf("OK %s\n", name);
        fflush(stdout);
    }
    MPI_OK(MPI_Finalize());
}

/* A byte pattern depending on the message identity. */
static inline unsigned char pat(size_t i, unsigned a, unsigned b)
{
    return (unsigned char)(i * 131u + (i >> 8) * 7u + a * 17u + b * 101u + 1u);
}

static inline void fill(void *buf, size_t n, unsigned a, unsigned b)
{
    unsigned char *p = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i, a, b);
}

/* Index of the first wrong byte, or -1. */
static inline long verify(const void *buf, size_t n, unsigned a, unsigned b)
{
    const unsigned char *p = (const unsigned char *)buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(i, a, b))
            return (long)i;
    return -1;
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        FAILF("out of memory (%zu bytes)", n);
    return p;
}

/* A small deterministic generator (xorshift64*). */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A ring of buffered sends on `c`: every rank posts `n` receives of `len` bytes from prev, then
 * sends `n` buffered messages of `len` bytes to next, each overwritten once MPI_Bsend returned
 * (MPI must have copied it). bsend_ring_end waits for the receives and checks their bytes; the
 * caller may flush buffers between the two. */
struct bsend_ring {
    MPI_Comm c;
    int n, len, prev;
    unsigned tag;
    char *in;
    MPI_Request *rq;
};

static inline struct bsend_ring bsend_ring_begin(MPI_Comm c, int n, int len, unsigned tag)
{
    int size, rank;
    MPI_OK(MPI_Comm_size(c, &size));
    MPI_OK(MPI_Comm_rank(c, &rank));
    struct bsend_ring r = {c, n, len, (rank + size - 1) % size, tag,
                           (char *)xmalloc((size_t)n * (size_t)len),
                           (MPI_Request *)xmalloc(sizeof(MPI_Request) * (size_t)n)};
    for (int i = 0; i < n; i++)
        MPI_OK(MPI_Irecv(r.in + (size_t)i * (size_t)len, len, MPI_CHAR, r.prev, (int)tag, c,
                         &r.rq[i]));
    char *out = (char *)xmalloc((size_t)len);
    for (int i = 0; i < n; i++) {
        fill(out, (size_t)len, (unsigned)rank, tag + (unsigned)i);
        MPI_OK(MPI_Bsend(out, len, MPI_CHAR, (rank + 1) % size, (int)tag, c));
        fill(out, (size_t)len, 99, 99);
    }
    free(out);
    return r;
}

static inline void bsend_ring_end(struct bsend_ring *r)
{
    MPI_OK(MPI_Waitall(r->n, r->rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < r->n; i++)
        CHECKF(verify(r->in + (size_t)i * (size_t)r->len, (size_t)r->len, (unsigned)r->prev,
                      r->tag + (unsigned)i) < 0,
               "message %d of tag %u", i, r->tag);
    free(r->in);
    free(r->rq);
}

#endif
