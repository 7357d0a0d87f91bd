/* coll.h - helpers shared by the collective test programs.
 *
 * Every test is self-checking: a failed check prints one line naming the
 * file, line and condition on stderr and aborts the whole job with
 * MPI_Abort, so the harness sees a non-zero exit.  A passing program has
 * rank 0 print "OK <name>" as its last line.  Expected values are computed
 * locally from the same formulas every rank uses for its contribution (a
 * sequential reference).
 */
#ifndef MADMPI_COLL_H
#define MADMPI_COLL_H

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

static inline int err_class(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

#define EXPECT_CLASS(call, cls)                                               \
    do {                                                                      \
        int rc_ = (call);                                                     \
        int c_ = err_class(rc_);                                              \
        if (c_ != (cls))                                                      \
            FAILF("%s: expected class %s (%d), got rc %d class %d", #call,    \
                  #cls, (int)(cls), rc_, c_);                                 \
    } while (0)

static inline void t_init(int *argc, char ***argv)
{
    MPI_OK(MPI_Init(argc, argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
}

static inline int is_madmpi(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strncmp(v, "madmpi", 6) == 0;
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

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        FAILF("out of memory (%zu bytes)", n);
    return p;
}

/* The contribution of rank r at index i (salt s tells tests apart). */
static inline int val(int r, int i, int s)
{
    return (int)((r * 131 + i * 7 + s * 31) % 1000) - 300;
}

#endif
