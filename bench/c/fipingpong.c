/* fipingpong.c - libfabric's own ping-pong (`fi_pingpong`, Debian package
 * libfabric-bin) as the raw floor under the MPI ping-pong in `ofi` mode.
 * Not an MPI program: it builds with the plain C compiler.
 *
 * For every size it starts `fi_pingpong` twice, a server and a client on
 * 127.0.0.1, on the provider named by MADMPI_OFI_PROVIDER (default
 * `tcp;ofi_rxm`, the one the runner gives the MPI runs), with a reliable
 * datagram endpoint (`-e rdm`, the endpoint type of madmpi's ofi driver and
 * of Open MPI's ofi MTL), and reads the client's `usec/xfer` column (half a
 * round trip: fi_pingpong counts two transfers per iteration).
 *
 * fi_pingpong's timing includes a fixed cost of its own (tens of ms over
 * tcp;ofi_rxm: the first transfers set up the connection), which would
 * dominate short runs: 8 B looked 3x slower at the iteration counts of the
 * MPI ping-pong. So each repetition runs it twice, with N and 4N iterations,
 * and reports the slope: (T(4N) - T(N)) / (2 * 3N), the time of a transfer
 * with the fixed cost taken out.
 *
 * Sizes, iteration policy and output are those of rawtcp.c and `pingpong
 * --mode lat`: RESULT lines with bench=pingpong mode=lat, metrics lat_us and
 * bw_MBps (median, min and max over the repetitions), a `# pingpong` header
 * whose library= names fi_pingpong and the provider, and `# done`.  0 B is
 * skipped (fi_pingpong has no empty transfer).  Options: --quick, --min,
 * --max, --reps, --iters, --scale, --mode (only lat runs), --window
 * (ignored): the options of pingpong.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raw_common.h"

/* Tries of the client while the server is still starting. */
#define CONNECT_TRIES 50

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Starts `fi_pingpong` with `args` (NULL-terminated), stdout to `out_fd`
 * (or /dev/null when < 0), in its own process group. */
static pid_t start(char *const args[], int out_fd)
{
    pid_t pid = fork();
    if (pid < 0) {
        perror("fipingpong: fork");
        exit(1);
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (out_fd >= 0) {
            dup2(out_fd, STDOUT_FILENO);
            close(out_fd);
        } else if (freopen("/dev/null", "w", stdout) == NULL) {
            _exit(127);
        }
        execvp(args[0], args);
        fprintf(stderr, "fipingpong: cannot run %s: %s\n", args[0],
                strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

static int finish(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The client's `usec/xfer` column, from a line of numbers whose first field
 * is the size; -1 when there is none. */
static double parse_usec(const char *text)
{
    const char *line = text;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        char buf[512];
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len >= sizeof buf)
            len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        /* bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec */
        char *f[8];
        int n = 0;
        for (char *t = strtok(buf, " \t"); t && n < 8; t = strtok(NULL, " \t"))
            f[n++] = t;
        if (n == 8 && f[0][0] >= '0' && f[0][0] <= '9') {
            char *end;
            double us = strtod(f[6], &end);
            if (end != f[6] && us > 0.0)
                return us;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1.0;
}

/* One fi_pingpong run of `iters` iterations of `n` bytes: half a round trip
 * in µs, or -1 after printing why it failed. */
static double one_run(const char *prov, long n, long iters, int port)
{
    char size[32], count[32], ports[16];
    snprintf(size, sizeof size, "%ld", n);
    snprintf(count, sizeof count, "%ld", iters);
    snprintf(ports, sizeof ports, "%d", port);
    char *srv[] = {"fi_pingpong", "-p", (char *)prov, "-e", "rdm", "-S", size,
                   "-I", count, "-B", ports, NULL};
    char *cli[] = {"fi_pingpong", "-p", (char *)prov, "-e", "rdm", "-S", size,
                   "-I", count, "-P", ports, "127.0.0.1", NULL};
    pid_t server = start(srv, -1);
    double us = -1.0;
    int rc = -1;
    for (int t = 0; t < CONNECT_TRIES && us < 0.0; t++) {
        pause_ms(t == 0 ? 20 : 50);
        int fds[2];
        if (pipe(fds) != 0) {
            perror("fipingpong: pipe");
            break;
        }
        pid_t client = start(cli, fds[1]);
        close(fds[1]);
        char out[8192];
        size_t got = 0;
        ssize_t r;
        while ((r = read(fds[0], out + got, sizeof out - 1 - got)) > 0 ||
               (r < 0 && errno == EINTR))
            if (r > 0)
                got += (size_t)r;
        close(fds[0]);
        out[got] = '\0';
        rc = finish(client);
        if (rc == 0)
            us = parse_usec(out);
        if (rc == 127)
            break;
        /* A client that failed before the server listened: try again, as
         * long as the server is still there. */
        if (us < 0.0 && waitpid(server, NULL, WNOHANG) != 0)
            break;
    }
    kill(-server, SIGKILL);
    finish(server);
    if (us < 0.0)
        fprintf(stderr, "fipingpong: fi_pingpong -p '%s' -S %ld failed "
                        "(client status %d)\n", prov, n, rc);
    return us;
}

int main(int argc, char **argv)
{
    struct opts o = parse_opts(argc, argv, "fipingpong");
    const char *prov = getenv("MADMPI_OFI_PROVIDER");
    if (prov == NULL || *prov == '\0')
        prov = "tcp;ofi_rxm";
    printf("# pingpong ranks=2 reps=%d quick=%d library=fi_pingpong "
           "(libfabric's ping-pong, -e rdm, provider %s)\n",
           o.reps, o.quick, prov);
    fflush(stdout);
    int port = 20000 + (int)(getpid() % 20000);
    int failed = 0;
    for (long n = next_size(&o, 0); o.lat && n > 0; n = next_size(&o, n)) {
        if (n < o.min_size)
            continue;
        if (o.max_size >= 0 && n > o.max_size)
            break;
        long iters = iters_for(&o, n);
        double us[MAX_REPS];
        int ok = 1;
        for (int r = 0; r < o.reps && ok; r++) {
            double a = one_run(prov, n, iters, port);
            double b = a > 0.0 ? one_run(prov, n, 4 * iters, port) : -1.0;
            /* usec/xfer * 2 transfers per iteration = total time. */
            double slope = (b * 8.0 * (double)iters - a * 2.0 * (double)iters) /
                           (6.0 * (double)iters);
            ok = a > 0.0 && b > 0.0;
            /* A fixed cost that shrank between the runs can make the slope
             * meaningless; the long run's own figure bounds it then. */
            us[r] = slope > 0.0 ? slope : b;
        }
        if (!ok) {
            failed = 1;
            break;
        }
        report(&o, n, iters, us);
    }
    printf("# done\n");
    return failed;
}
