/* common_io.h - helpers of the MPI-IO test programs: every program takes the
 * directory to work in as argv[1] (the harness makes it and removes it). */
#ifndef MADMPI_IO_COMMON_H
#define MADMPI_IO_COMMON_H

/* pread, access, fstat with -std=c99 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#include "../p2p/common.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char t_dir[512];

/* "<dir>/<name>" in a static buffer (one at a time). */
static const char *path_of(const char *name)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", t_dir, name);
    return p;
}

/* Read a whole file with POSIX: returns its size, data in *out (malloc'd). */
static long posix_slurp(const char *path, unsigned char **out)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    struct stat st;
    fstat(fd, &st);
    unsigned char *b = malloc(st.st_size + 1);
    long got = 0;
    while (got < st.st_size) {
        ssize_t n = pread(fd, b + got, st.st_size - got, got);
        if (n <= 0)
            break;
        got += n;
    }
    close(fd);
    *out = b;
    return got;
}

static void io_init(int *argc, char ***argv)
{
    MPI_OK(MPI_Init(argc, argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    if (*argc < 2)
        FAILF("usage: %s DIR", (*argv)[0]);
    snprintf(t_dir, sizeof t_dir, "%s", (*argv)[1]);
}

#endif
