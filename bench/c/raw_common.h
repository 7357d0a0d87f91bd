/* raw_common.h - what the raw baselines (rawtcp.c, fipingpong.c: plain C
 * programs, not MPI) share with each other and with `pingpong --mode lat`:
 * the options, the size list, the iteration policy and the RESULT lines. */
#ifndef MADMPI_BENCH_RAW_COMMON_H
#define MADMPI_BENCH_RAW_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (4L << 20)
#define MAX_REPS 101

static const long quick_sizes[] = {1, 8, 64, 512, 4096, 32768, 262144,
                                   1L << 20, 4L << 20};
#define NQUICK ((int)(sizeof quick_sizes / sizeof quick_sizes[0]))

struct opts {
    int quick;
    long min_size, max_size;
    int reps;
    long iters; /* > 0: forced */
    double scale;
    int lat; /* whether mode lat is selected */
};

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [--quick] [--min BYTES] [--max BYTES] "
                    "[--reps N] [--iters N] [--scale F] [--mode lat|bw|bibw] "
                    "[--window N]\n", prog);
}

/* The options of pingpong: --quick, --min, --max, --reps, --iters, --scale,
 * --mode (only lat measures anything), --window (accepted, ignored). */
static struct opts parse_opts(int argc, char **argv, const char *prog)
{
    struct opts o = {0, 0, -1, -1, 0, 1.0, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0 || strcmp(a, "-q") == 0) {
            o.quick = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        int bad = v == NULL;
        if (bad) {
        } else if (strcmp(a, "--min") == 0) {
            o.min_size = strtol(v, &end, 0);
        } else if (strcmp(a, "--max") == 0) {
            o.max_size = strtol(v, &end, 0);
        } else if (strcmp(a, "--reps") == 0) {
            o.reps = (int)strtol(v, &end, 0);
            bad = o.reps < 1 || o.reps > MAX_REPS;
        } else if (strcmp(a, "--iters") == 0) {
            o.iters = strtol(v, &end, 0);
            bad = o.iters < 1;
        } else if (strcmp(a, "--scale") == 0) {
            o.scale = strtod(v, &end);
            bad = !(o.scale > 0.0);
        } else if (strcmp(a, "--window") == 0) {
            long w = strtol(v, &end, 0);
            bad = w < 1 || w > 4096;
        } else if (strcmp(a, "--mode") == 0) {
            bad = strcmp(v, "lat") != 0 && strcmp(v, "bw") != 0 &&
                  strcmp(v, "bibw") != 0;
            o.lat = strcmp(v, "lat") == 0;
            end = (char *)v + strlen(v);
        } else {
            bad = 1;
        }
        if (bad || end == NULL || *end != '\0') {
            usage(prog);
            exit(2);
        }
        i++;
    }
    if (o.reps < 0)
        o.reps = o.quick ? 3 : 5;
    return o;
}

/* The size after `s` (0: the first), or -1; 0 B is never measured. */
static long next_size(const struct opts *o, long s)
{
    if (o->quick) {
        for (int i = 0; i < NQUICK; i++)
            if (quick_sizes[i] > s)
                return quick_sizes[i];
        return -1;
    }
    long n = s == 0 ? 1 : s * 2;
    return n <= MAX_SIZE ? n : -1;
}

/* common.h's bench_iters_for_size(o, n, 64 MiB, 40, 10000). */
static long iters_for(const struct opts *o, long bytes)
{
    if (o->iters > 0)
        return o->iters;
    double n = 64.0 * 1048576 / (double)(bytes > 1024 ? bytes : 1024);
    double base = n > 10000 ? 10000 : (n < 40 ? 40 : (long)n);
    base *= o->scale;
    if (o->quick)
        base /= 4.0;
    return base < 2 ? 2 : (long)base;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The two RESULT lines of size `n` from the half round trips `us` (µs, one
 * per repetition; sorted here): lat_us and bw_MBps, min, median and max. */
static void report(const struct opts *o, long n, long iters, double *us)
{
    qsort(us, (size_t)o->reps, sizeof us[0], cmp_double);
    double min = us[0], max = us[o->reps - 1];
    double med = o->reps % 2 ? us[o->reps / 2]
                             : 0.5 * (us[o->reps / 2 - 1] + us[o->reps / 2]);
    printf("RESULT bench=pingpong mode=lat size=%ld ranks=2 iters=%ld reps=%d "
           "metric=lat_us better=lower min=%.6g med=%.6g max=%.6g\n",
           n, iters, o->reps, min, med, max);
    printf("RESULT bench=pingpong mode=lat size=%ld ranks=2 iters=%ld reps=%d "
           "metric=bw_MBps better=higher min=%.6g med=%.6g max=%.6g\n",
           n, iters, o->reps, (double)n / max, (double)n / med,
           (double)n / min);
    fflush(stdout);
}

#endif
