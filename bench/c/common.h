/* common.h - shared helpers for the madmpi benchmark programs (standard MPI
 * only, header-only so each benchmark builds from one .c file:
 * `mpicc -I bench/c bench/c/pingpong.c`).
 *
 * Output format (documented in bench/README.md): every measurement is one
 * line
 *
 *   RESULT bench=<name> mode=<mode> size=<bytes> ranks=<n> iters=<n>
 *          reps=<n> metric=<name> better=<lower|higher>
 *          min=<x> med=<x> max=<x> [extra key=value ...]
 *
 * on one line, printed by rank 0 only.  min/med/max are over the `reps`
 * timed repetitions inside the program, each of `iters` iterations.  Lines
 * starting with `#` are comments; the last line of a complete run is
 * `# done`.  Nothing else is printed on stdout.  Errors go to stderr and the
 * program exits non-zero.
 *
 * Common options (every benchmark):
 *   --quick         fewer sizes and iterations
 *   --min N         smallest size in bytes to run (default: all)
 *   --max N         largest size in bytes to run (default: all)
 *   --reps N        timed repetitions per size (default 5, 3 with --quick)
 *   --iters N       force the iteration count per repetition
 *   --scale F       multiply the size-scaled iteration counts by F
 *   --mode M        benchmark-specific mode selection (default: all)
 *   --window N      messages in flight for windowed modes (default 64)
 */
#ifndef MADMPI_BENCH_COMMON_H
#define MADMPI_BENCH_COMMON_H

/* posix_memalign with -std=c99 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200112L
#endif

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_REPS 101

struct bench_opts {
    const char *name;
    int quick;
    long min_size;
    long max_size;
    int reps;
    long iters;     /* > 0: forced */
    double scale;
    const char *mode; /* NULL: all modes */
    int window;
};

static inline void bench_usage(const char *name, const char *modes)
{
    fprintf(stderr,
            "usage: %s [--quick] [--min BYTES] [--max BYTES] [--reps N] "
            "[--iters N] [--scale F] [--mode %s] [--window N]\n",
            name, modes);
}

/* Parses the common options; exits (after MPI_Finalize) on a bad argument.
 * `modes` lists the valid --mode values separated by '|'. */
static inline struct bench_opts bench_init(int *argc, char ***argv,
                                           const char *name, const char *modes)
{
    struct bench_opts o;
    o.name = name;
    o.quick = 0;
    o.min_size = 0;
    o.max_size = -1;
    o.reps = -1;
    o.iters = 0;
    o.scale = 1.0;
    o.mode = NULL;
    o.window = 64;

    MPI_Init(argc, argv);
    int bad = 0;
    for (int i = 1; i < *argc && !bad; i++) {
        const char *a = (*argv)[i];
        const char *v = i + 1 < *argc ? (*argv)[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0 || strcmp(a, "-q") == 0) {
            o.quick = 1;
            continue;
        }
        if (v == NULL) {
            bad = 1;
            break;
        }
        char *end = NULL;
        if (strcmp(a, "--min") == 0) {
            o.min_size = strtol(v, &end, 0);
        } else if (strcmp(a, "--max") == 0) {
            o.max_size = strtol(v, &end, 0);
        } else if (strcmp(a, "--reps") == 0) {
            o.reps = (int)strtol(v, &end, 0);
            if (o.reps < 1 || o.reps > BENCH_MAX_REPS)
                bad = 1;
        } else if (strcmp(a, "--iters") == 0) {
            o.iters = strtol(v, &end, 0);
            if (o.iters < 1)
                bad = 1;
        } else if (strcmp(a, "--scale") == 0) {
            o.scale = strtod(v, &end);
            if (!(o.scale > 0.0))
                bad = 1;
        } else if (strcmp(a, "--window") == 0) {
            o.window = (int)strtol(v, &end, 0);
            if (o.window < 1 || o.window > 4096)
                bad = 1;
        } else if (strcmp(a, "--mode") == 0) {
            /* Accept only a listed mode: a typo must not silently run
             * nothing. */
            size_t n = strlen(v);
            const char *p = modes;
            int found = 0;
            while (*p) {
                size_t l = strcspn(p, "|");
                if (l == n && strncmp(p, v, n) == 0)
                    found = 1;
                p += l;
                if (*p == '|')
                    p++;
            }
            if (!found)
                bad = 1;
            o.mode = v;
            end = (char *)v + n;
        } else {
            bad = 1;
            break;
        }
        if (end == NULL || *end != '\0')
            bad = 1;
        i++;
    }
    if (bad) {
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            bench_usage(name, modes);
        MPI_Finalize();
        exit(2);
    }
    if (o.reps < 0)
        o.reps = o.quick ? 3 : 5;
    return o;
}

static inline int bench_mode_on(const struct bench_opts *o, const char *mode)
{
    return o->mode == NULL || strcmp(o->mode, mode) == 0;
}

static inline int bench_size_on(const struct bench_opts *o, long size)
{
    return size >= o->min_size && (o->max_size < 0 || size <= o->max_size);
}

/* Iteration count: `base` scaled by --scale (and down by 4 for --quick),
 * at least `floor_`, unless --iters forces it. */
static inline long bench_iters(const struct bench_opts *o, long base,
                               long floor_)
{
    if (o->iters > 0)
        return o->iters;
    double n = (double)base * o->scale;
    if (o->quick)
        n /= 4.0;
    long r = (long)n;
    return r < floor_ ? floor_ : r;
}

/* Iterations for a message of `bytes`: enough to move about `budget` bytes,
 * between `lo` and `hi` (before --scale/--quick). */
static inline long bench_iters_for_size(const struct bench_opts *o,
                                        long bytes, double budget, long lo,
                                        long hi)
{
    double n = budget / (double)(bytes > 1024 ? bytes : 1024);
    long base = n > (double)hi ? hi : (n < (double)lo ? lo : (long)n);
    return bench_iters(o, base, 2);
}

/* Caps `iters` so that one repetition takes about 0.1 s (0.05 s with
 * --quick) on the slowest rank: with more ranks than cores, a busy-polling
 * implementation can be a thousand times slower than its dedicated-core
 * figure, and a benchmark must still finish.  Runs `op(ctx)` a doubling
 * number of times (this doubles as the warm-up).  Collective: every rank
 * must call it with the same `iters`; all get the same answer.  With
 * --iters the count is forced and nothing is run. */
static inline long bench_time_cap(const struct bench_opts *o, long iters,
                                  void (*op)(void *), void *ctx)
{
    if (o->iters > 0)
        return o->iters;
    double target = o->quick ? 0.05 : 0.1;
    long n = 1;
    double el = 0.0;
    /* A first call can be very slow (connection set-up, page faults); the
     * doubling runs below finish the warm-up. */
    for (long i = 0; i < iters && i < 2; i++)
        op(ctx);
    for (;;) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++)
            op(ctx);
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(&t, &el, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (el >= target / 4 || n >= iters)
            break;
        n *= 2;
    }
    double cap = el > 0.0 ? (double)n * target / el : (double)iters;
    long r = cap < (double)iters ? (long)cap : iters;
    return r < 1 ? 1 : r;
}

/* Times `reps` repetitions of `iters` calls of op(ctx) into secs[]: each
 * repetition starts after a barrier and its time is the slowest rank's. */
static inline void bench_time_reps(const struct bench_opts *o, long iters,
                                   void (*op)(void *), void *ctx,
                                   double *secs)
{
    for (int r = 0; r < o->reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++)
            op(ctx);
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(&t, &secs[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct bench_stats {
    double min, med, max;
};

static inline struct bench_stats bench_stats_of(const double *v, int n)
{
    double s[BENCH_MAX_REPS];
    struct bench_stats r = {0.0, 0.0, 0.0};
    if (n <= 0)
        return r;
    if (n > BENCH_MAX_REPS)
        n = BENCH_MAX_REPS;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    r.min = s[0];
    r.max = s[n - 1];
    r.med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    return r;
}

/* Prints one RESULT line; `extra` (may be NULL or "") is appended as is. */
static inline void bench_result(const struct bench_opts *o, const char *mode,
                                long size, long iters, const char *metric,
                                const char *better, struct bench_stats st,
                                const char *extra)
{
    int nranks;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    printf("RESULT bench=%s mode=%s size=%ld ranks=%d iters=%ld reps=%d "
           "metric=%s better=%s min=%.6g med=%.6g max=%.6g%s%s\n",
           o->name, mode, size, nranks, iters, o->reps, metric, better,
           st.min, st.med, st.max, (extra && *extra) ? " " : "",
           extra ? extra : "");
    fflush(stdout);
}

/* Latency in microseconds per operation from per-repetition seconds, and
 * the bandwidth (MB/s, 1 MB = 1e6 B) that `bytes` per operation gives. */
static inline struct bench_stats bench_us_per_op(const double *secs, int reps,
                                                 long ops_per_rep)
{
    double us[BENCH_MAX_REPS];
    for (int i = 0; i < reps && i < BENCH_MAX_REPS; i++)
        us[i] = secs[i] * 1e6 / (double)ops_per_rep;
    return bench_stats_of(us, reps);
}

static inline struct bench_stats bench_bw_of_lat(struct bench_stats lat_us,
                                                 double bytes)
{
    struct bench_stats r;
    r.min = lat_us.max > 0 ? bytes / lat_us.max : 0.0;
    r.med = lat_us.med > 0 ? bytes / lat_us.med : 0.0;
    r.max = lat_us.min > 0 ? bytes / lat_us.min : 0.0;
    return r;
}

/* Deterministic byte pattern for data checks. */
static inline unsigned char bench_byte(long i, long seed)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
    return (unsigned char)(x >> 56);
}

static inline void bench_fill(void *buf, long n, long seed)
{
    unsigned char *b = buf;
    for (long i = 0; i < n; i++)
        b[i] = bench_byte(i, seed);
}

/* Returns the first wrong offset, or -1. */
static inline long bench_check(const void *buf, long n, long seed)
{
    const unsigned char *b = buf;
    for (long i = 0; i < n; i++)
        if (b[i] != bench_byte(i, seed))
            return i;
    return -1;
}

/* Reports a data error from any rank and stops the job. */
static inline void bench_fail(const struct bench_opts *o, const char *what,
                              long size, long offset)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "%s: rank %d: %s: size %ld: wrong data at offset %ld\n",
            o->name, rank, what, size, offset);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static inline void *bench_malloc(size_t n)
{
    void *p = NULL;
    /* Page-aligned, like most applications' large buffers. */
    if (posix_memalign(&p, 4096, n > 0 ? n : 1) != 0 || p == NULL) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, 0, n > 0 ? n : 1);
    return p;
}

/* Waits for all requests with a real status array (GCC's
 * -Wstringop-overflow misreads MPI_STATUSES_IGNORE with some headers). */
static inline void bench_waitall(int n, MPI_Request *reqs)
{
    MPI_Status st[256];
    for (int done = 0; done < n; done += 256) {
        int k = n - done < 256 ? n - done : 256;
        MPI_Waitall(k, reqs + done, st);
    }
}

/* Rank 0 prints a comment line naming the library, so a results file says
 * what produced it. */
static inline void bench_header(const struct bench_opts *o)
{
    int rank, size, len;
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_library_version(v, &len);
    v[strcspn(v, "\r\n")] = '\0';
    if (rank == 0) {
        printf("# %s ranks=%d reps=%d quick=%d library=%s\n", o->name, size,
               o->reps, o->quick, v);
        fflush(stdout);
    }
}

/* Ends a successful run: rank 0 prints the `# done` line (the runner then
 * knows every measurement is out, and gives a launcher that hangs in
 * MPI_Finalize only a short grace period), then MPI_Finalize. */
static inline void bench_finish(void)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("# done\n");
        fflush(stdout);
    }
    MPI_Finalize();
}

#endif
