/* rawtcp.c - the raw TCP floor under the MPI ping-pong: two processes
 * (fork) connected by one loopback TCP socket with TCP_NODELAY, non-blocking,
 * busy-polling recv/send (a short spin, then sched_yield between polls), no
 * framing, no copies beyond the kernel's.  Not an MPI program: it builds with
 * the plain C compiler (`cc -std=c99 -O2 bench/c/rawtcp.c`).
 *
 * It measures what `pingpong --mode lat` measures, with the same sizes
 * (1 B .. 4 MiB; --quick: the same short list; 0 B is skipped, TCP cannot
 * carry an empty message), the same iteration policy (about 64 MiB per
 * repetition, 40 .. 10000 iterations, capped to about 0.1 s per repetition,
 * 0.05 s with --quick) and the same output: RESULT lines with bench=pingpong
 * mode=lat, metrics lat_us (half round trip) and bw_MBps, a `# pingpong`
 * header whose library= names this program, and `# done` at the end.  The
 * benchmark runner runs it in TCP mode, interleaved with the MPI runs, as the
 * `raw TCP` baseline (bench/README.md).
 *
 * Options: --quick, --min BYTES, --max BYTES, --reps N, --iters N,
 * --scale F, --mode lat|bw|bibw (only lat is measured; the others run
 * nothing), --window N (accepted and ignored): the options of pingpong, so
 * the runner can pass both the same arguments.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "raw_common.h"

/* Failed polls before each further poll is preceded by sched_yield: the
 * budget of madmpi's own wait loop (mpi-core/src/api/wait.rs, 2000 polls when
 * every rank has a core), so both wait alike on a shared machine. */
#define SPINS 2000

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *who, const char *what)
{
    fprintf(stderr, "rawtcp: %s: %s: %s\n", who, what, strerror(errno));
    exit(1);
}

static const char *who = "parent";

/* Busy-polls until all of buf has arrived. */
static void recv_all(int fd, void *buf, long n)
{
    char *p = buf;
    int spins = 0;
    while (n > 0) {
        ssize_t r = recv(fd, p, (size_t)n, 0);
        if (r > 0) {
            p += r;
            n -= r;
            spins = 0;
        } else if (r == 0) {
            errno = ECONNRESET;
            die(who, "peer closed the connection");
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            if (++spins > SPINS)
                sched_yield();
        } else {
            die(who, "recv");
        }
    }
}

/* Busy-polls until all of buf is written. */
static void send_all(int fd, const void *buf, long n)
{
    const char *p = buf;
    int spins = 0;
    while (n > 0) {
        ssize_t r = send(fd, p, (size_t)n, MSG_NOSIGNAL);
        if (r > 0) {
            p += r;
            n -= r;
            spins = 0;
        } else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR) {
            die(who, "send");
        } else if (++spins > SPINS) {
            sched_yield();
        }
    }
}

static void setup(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die(who, "TCP_NODELAY");
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        die(who, "O_NONBLOCK");
}

/* Deterministic byte pattern (the same as common.h's). */
static unsigned char pattern(long i, long seed)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull +
                 (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
    return (unsigned char)(x >> 56);
}

static void fill(unsigned char *b, long n, long seed)
{
    for (long i = 0; i < n; i++)
        b[i] = pattern(i, seed);
}

static long check(const unsigned char *b, long n, long seed)
{
    for (long i = 0; i < n; i++)
        if (b[i] != pattern(i, seed))
            return i;
    return -1;
}

/* What the parent asks the child: `count` round trips of `size` bytes;
 * count 0 is the checked exchange, count < 0 means exit. */
struct cmd {
    int64_t size, count;
};

static void child(int fd, unsigned char *sbuf, unsigned char *rbuf)
{
    who = "child";
    for (;;) {
        struct cmd c;
        recv_all(fd, &c, sizeof c);
        if (c.count < 0)
            return;
        if (c.count == 0) {
            recv_all(fd, rbuf, c.size);
            long bad = check(rbuf, c.size, c.size * 2);
            if (bad >= 0) {
                fprintf(stderr, "rawtcp: child: size %ld: wrong data at "
                                "offset %ld\n", (long)c.size, bad);
                exit(3);
            }
            fill(sbuf, c.size, c.size * 2 + 1);
            send_all(fd, sbuf, c.size);
            continue;
        }
        for (int64_t i = 0; i < c.count; i++) {
            recv_all(fd, rbuf, c.size);
            send_all(fd, sbuf, c.size);
        }
    }
}

/* `count` timed round trips of `n` bytes; seconds. */
static double round_trips(int fd, unsigned char *sbuf, unsigned char *rbuf,
                          long n, long count)
{
    struct cmd c = {n, count};
    send_all(fd, &c, sizeof c);
    double t0 = now();
    for (long i = 0; i < count; i++) {
        send_all(fd, sbuf, n);
        recv_all(fd, rbuf, n);
    }
    return now() - t0;
}

/* common.h's bench_time_cap: about 0.1 s (0.05 s with --quick) per
 * repetition; the doubling runs are the warm-up. */
static long time_cap(const struct opts *o, int fd, unsigned char *sbuf,
                     unsigned char *rbuf, long n, long iters)
{
    if (o->iters > 0)
        return o->iters;
    double target = o->quick ? 0.05 : 0.1;
    round_trips(fd, sbuf, rbuf, n, iters < 2 ? iters : 2);
    long k = 1;
    double el;
    for (;;) {
        el = round_trips(fd, sbuf, rbuf, n, k);
        if (el >= target / 4 || k >= iters)
            break;
        k *= 2;
    }
    double cap = el > 0.0 ? (double)k * target / el : (double)iters;
    long r = cap < (double)iters ? (long)cap : iters;
    return r < 1 ? 1 : r;
}

static void parent(const struct opts *o, int fd, unsigned char *sbuf,
                   unsigned char *rbuf)
{
    for (long n = next_size(o, 0); n > 0; n = next_size(o, n)) {
        if (n < o->min_size)
            continue;
        if (o->max_size >= 0 && n > o->max_size)
            break;
        /* Checked exchange: each side sends its own pattern. */
        struct cmd c = {n, 0};
        send_all(fd, &c, sizeof c);
        fill(sbuf, n, n * 2);
        memset(rbuf, 0, (size_t)n);
        send_all(fd, sbuf, n);
        recv_all(fd, rbuf, n);
        long bad = check(rbuf, n, n * 2 + 1);
        if (bad >= 0) {
            fprintf(stderr, "rawtcp: parent: size %ld: wrong data at offset "
                            "%ld\n", n, bad);
            exit(3);
        }

        long iters = time_cap(o, fd, sbuf, rbuf, n, iters_for(o, n));
        double us[MAX_REPS];
        for (int r = 0; r < o->reps; r++)
            us[r] = round_trips(fd, sbuf, rbuf, n, iters) * 1e6 /
                    (double)(2 * iters);
        report(o, n, iters, us);
    }
}

int main(int argc, char **argv)
{
    struct opts o = parse_opts(argc, argv, "rawtcp");
    printf("# pingpong ranks=2 reps=%d quick=%d library=raw TCP (rawtcp.c: "
           "loopback, TCP_NODELAY, busy-polling non-blocking sockets)\n",
           o.reps, o.quick);
    fflush(stdout);

    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0)
        die(who, "socket");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t alen = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) != 0)
        die(who, "bind/listen");

    unsigned char *sbuf = malloc(MAX_SIZE), *rbuf = malloc(MAX_SIZE);
    if (sbuf == NULL || rbuf == NULL)
        die(who, "malloc");
    memset(sbuf, 0x5a, MAX_SIZE);
    memset(rbuf, 0, MAX_SIZE);

    pid_t pid = fork();
    if (pid < 0)
        die(who, "fork");
    if (pid == 0) {
        close(l);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            die("child", "connect");
        setup(fd);
        child(fd, sbuf, rbuf);
        close(fd);
        _exit(0);
    }
    int fd = accept(l, NULL, NULL);
    if (fd < 0)
        die(who, "accept");
    close(l);
    setup(fd);
    if (o.lat)
        parent(&o, fd, sbuf, rbuf);
    struct cmd stop = {0, -1};
    send_all(fd, &stop, sizeof stop);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
        WEXITSTATUS(st) != 0) {
        fprintf(stderr, "rawtcp: the child process failed (status %d)\n", st);
        return 1;
    }
    close(fd);
    free(sbuf);
    free(rbuf);
    printf("# done\n");
    fflush(stdout);
    return 0;
}
