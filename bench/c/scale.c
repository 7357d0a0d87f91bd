/* scale.c - start-up time and shared memory of a job of many ranks on one
 * node.
 *
 * Every rank reads the clock just before MPI_Init and just after its first
 * MPI_Allreduce (one int, MPI_SUM, checked); the start-up time of the job is
 * the slowest rank's, in microseconds (metric startup_us, lower is better).
 * A second Allreduce of 1 KiB of doubles per rank is checked too, so the
 * collective moves real bytes over the node's transport.
 *
 * Shared memory: after the collectives every rank lists the shared mappings
 * of its own address space (/proc/self/smaps, permissions with 's': the
 * segments an implementation maps in /dev/shm or elsewhere, deleted or
 * not), as (device, inode, size) triples; rank 0 gathers them and adds up
 * the size of every distinct file once (the largest size any rank maps of
 * it).  Reported as shm_mib (MiB mapped per node, lower is better), with
 * the number of distinct shared files (extra key files=) and the resident
 * part summed over ranks (rss_mib=, counts a page once per rank mapping
 * it).  Ranks must all run on one node for shm_mib to mean "per node".
 *
 * Options: --reps N is ignored (one start-up per launch: the runner launches
 * several times); --quick changes nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MAPS 1024
#define DBL_PER_RANK 128

struct map {
    unsigned long long dev, ino, size, rss;
};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The shared mappings of this process (at most MAX_MAPS), merged by file. */
static int shared_maps(struct map *out)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[4096];
    int n = 0, cur = -1;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off, ino;
        unsigned maj, mnr;
        char perms[8];
        unsigned long long kb;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &off,
                   &maj, &mnr, &ino) == 7) {
            cur = -1;
            if (strlen(perms) < 4 || perms[3] != 's')
                continue;
            unsigned long long dev = ((unsigned long long)maj << 32) | mnr;
            for (int i = 0; i < n; i++)
                if (out[i].dev == dev && out[i].ino == ino)
                    cur = i;
            if (cur < 0 && n < MAX_MAPS) {
                cur = n++;
                out[cur].dev = dev;
                out[cur].ino = ino;
                out[cur].size = 0;
                out[cur].rss = 0;
            }
            if (cur >= 0)
                out[cur].size += hi - lo;
        } else if (cur >= 0 && sscanf(line, "Rss: %llu kB", &kb) == 1) {
            out[cur].rss += kb * 1024;
        }
    }
    fclose(f);
    return n;
}

/* qsort order of (dev, ino, size, rss) records: by file, largest first. */
static int by_file(const void *a, const void *b)
{
    const unsigned long long *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return i == 2 ? (x[i] < y[i] ? 1 : -1) : (x[i] < y[i] ? -1 : 1);
    return 0;
}

int main(int argc, char **argv)
{
    double t0 = now_us();
    MPI_Init(&argc, &argv);
    int rank, size, one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    double t1 = now_us();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    (void)argv;
    if (sum != size) {
        fprintf(stderr, "scale: rank %d: first Allreduce gave %d, want %d\n",
                rank, sum, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* A checked Allreduce with bytes in it: element i of rank r is r + i. */
    double in[DBL_PER_RANK], out[DBL_PER_RANK];
    for (int i = 0; i < DBL_PER_RANK; i++)
        in[i] = rank + i;
    MPI_Allreduce(in, out, DBL_PER_RANK, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < DBL_PER_RANK; i++) {
        double want = (double)size * (size - 1) / 2 + (double)size * i;
        if (out[i] != want) {
            fprintf(stderr, "scale: rank %d: element %d is %g, want %g\n",
                    rank, i, out[i], want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    double mine = t1 - t0, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    static struct map maps[MAX_MAPS];
    unsigned long long mine_maps[MAX_MAPS * 4];
    int nm = shared_maps(maps);
    memset(mine_maps, 0, sizeof mine_maps);
    for (int i = 0; i < nm; i++) {
        mine_maps[4 * i] = maps[i].dev;
        mine_maps[4 * i + 1] = maps[i].ino;
        mine_maps[4 * i + 2] = maps[i].size;
        mine_maps[4 * i + 3] = maps[i].rss;
    }
    unsigned long long *all = NULL;
    if (rank == 0) {
        all = malloc(sizeof mine_maps * (size_t)size);
        if (!all) {
            fprintf(stderr, "scale: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Gather(mine_maps, MAX_MAPS * 4, MPI_UNSIGNED_LONG_LONG, all,
               MAX_MAPS * 4, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* Distinct files: the largest mapped size of each. */
        long nall = (long)size * MAX_MAPS, nf = 0;
        unsigned long long total = 0, rss = 0;
        qsort(all, (size_t)nall, 4 * sizeof *all, by_file);
        for (long k = 0; k < nall; k++) {
            unsigned long long *m = all + 4 * k, *prev = all + 4 * (k - 1);
            if (m[2] == 0)
                continue;
            rss += m[3];
            if (k > 0 && prev[2] != 0 && prev[0] == m[0] && prev[1] == m[1])
                continue; /* sorted by size last: the largest came first */
            nf++;
            total += m[2];
        }
        printf("# scale: %d ranks, first Allreduce after %.0f us (slowest "
               "rank), %ld shared files, %.1f MiB mapped\n",
               size, slowest, nf, (double)total / 1048576.0);
        printf("RESULT bench=scale mode=startup size=0 ranks=%d iters=1 "
               "reps=1 metric=startup_us better=lower min=%.1f med=%.1f "
               "max=%.1f\n",
               size, slowest, slowest, slowest);
        printf("RESULT bench=scale mode=shm size=0 ranks=%d iters=1 reps=1 "
               "metric=shm_mib better=lower min=%.2f med=%.2f max=%.2f "
               "files=%ld rss_mib=%.2f\n",
               size, (double)total / 1048576.0, (double)total / 1048576.0,
               (double)total / 1048576.0, nf, (double)rss / 1048576.0);
        printf("# done\n");
        fflush(stdout);
        free(all);
    }
    MPI_Finalize();
    return 0;
}
