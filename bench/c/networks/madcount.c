/* madcount.c - the software path of one round trip, for callgrind's
 * instruction counts (load-independent, where a wall clock is not on a shared
 * machine).  Ranks 0 and 1 ping-pong an 8-byte payload (argv[1]: "mad", the
 * Madeleine API as madpingpong.c builds its messages; "mpi", MPI_Send and
 * MPI_Recv), argv[2] round trips (default 200).  Before each receive a rank
 * waits, outside MPI, until the peer says (in a shared counter, a POSIX shm
 * object) that its send returned, then 2 ms more, so that the message is
 * there and visible when the receive starts: the receive then never waits,
 * and the instructions counted are the path's own, not a wait's.  Collection is on only inside send_msg and
 * recv_msg, after 20 warm-up round trips:
 *
 *   valgrind --tool=callgrind --collect-atstart=no madcount mad 200
 *
 * (under mpirun -np 2); the instructions of both ranks' files, summed and
 * divided by the round trips, are one round trip's.  The emulator's own
 * busy-waits (o_s, o_r: clock::spin_until) are part of them; callgrind_annotate
 * --inclusive=yes shows them apart.
 */
#include <mpi.h>
#include <madeleine.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define WARMUP 20

static int use_mad;
static mad_channel_t ch;
static unsigned char sbuf[8], rbuf[8];

/* sends[r]: the sends rank r has completed. */
static volatile long *sends;

static void nap_ns(long ns)
{
    struct timespec t = {0, ns};
    nanosleep(&t, NULL);
}

/* Wait (sleeping) until the peer has completed `count` sends, then 2 ms. */
static void await_send(int peer, long count)
{
    while (__atomic_load_n(&sends[peer], __ATOMIC_ACQUIRE) < count)
        nap_ns(100000);
    nap_ns(2000000);
}

static void sent(int rank)
{
    __atomic_add_fetch(&sends[rank], 1, __ATOMIC_RELEASE);
}

static void __attribute__((noinline)) send_msg(int peer)
{
    if (use_mad) {
        mad_connection_t m;
        uint64_t head = sizeof sbuf;
        mad_begin_packing(ch, peer, &m);
        mad_pack(m, &head, sizeof head, mad_send_CHEAPER,
                 mad_receive_EXPRESS);
        mad_pack(m, sbuf, sizeof sbuf, mad_send_CHEAPER, mad_receive_CHEAPER);
        mad_end_packing(&m);
    } else {
        MPI_Send(sbuf, sizeof sbuf, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
    }
}

static void __attribute__((noinline)) recv_msg(int peer)
{
    if (use_mad) {
        mad_connection_t m;
        uint64_t head = 0;
        mad_begin_unpacking_from(ch, peer, &m);
        mad_unpack(m, &head, sizeof head, mad_send_CHEAPER,
                   mad_receive_EXPRESS);
        if (head != sizeof rbuf) {
            fprintf(stderr, "madcount: header says %llu bytes\n",
                    (unsigned long long)head);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        mad_unpack(m, rbuf, sizeof rbuf, mad_send_CHEAPER,
                   mad_receive_CHEAPER);
        mad_end_unpacking(&m);
    } else {
        MPI_Recv(rbuf, sizeof rbuf, MPI_BYTE, peer, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    use_mad = argc > 1 && strcmp(argv[1], "mad") == 0;
    long n = argc > 2 ? atol(argv[2]) : 200;
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "madcount: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    if (use_mad)
        mad_open_channel(MPI_COMM_WORLD, &ch);
    char name[64];
    int job = getppid();
    if (rank == 0)
        MPI_Send(&job, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
    else
        MPI_Recv(&job, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    snprintf(name, sizeof name, "/madcount-%d-%d", (int)getuid(), job);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror("madcount: shm_open");
        MPI_Abort(MPI_COMM_WORLD, 5);
    }
    sends = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (sends == MAP_FAILED) {
        perror("madcount: mmap");
        MPI_Abort(MPI_COMM_WORLD, 5);
    }
    close(fd);
    if (rank == 0)
        sends[0] = sends[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    memset(sbuf, rank + 1, sizeof sbuf);
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < WARMUP + n; i++) {
        if (i == WARMUP)
            CALLGRIND_ZERO_STATS;
        if (rank == 0) {
            CALLGRIND_TOGGLE_COLLECT;
            send_msg(1);
            CALLGRIND_TOGGLE_COLLECT;
            sent(0);
            await_send(1, i + 1);
            CALLGRIND_TOGGLE_COLLECT;
            recv_msg(1);
            CALLGRIND_TOGGLE_COLLECT;
        } else {
            await_send(0, i + 1);
            CALLGRIND_TOGGLE_COLLECT;
            recv_msg(0);
            CALLGRIND_TOGGLE_COLLECT;
            CALLGRIND_TOGGLE_COLLECT;
            send_msg(0);
            CALLGRIND_TOGGLE_COLLECT;
            sent(1);
        }
    }
    CALLGRIND_DUMP_STATS_AT("end");
    if (rbuf[0] != (unsigned char)(2 - rank)) {
        fprintf(stderr, "madcount: rank %d received %d\n", rank, rbuf[0]);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    munmap((void *)sends, 4096);
    if (rank == 0)
        shm_unlink(name);
    if (use_mad)
        mad_close_channel(&ch);
    MPI_Finalize();
    return 0;
}
