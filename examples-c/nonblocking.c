/* nonblocking.c - non-blocking point-to-point communication patterns.
 *
 *   A. every rank exchanges a message with every rank (itself included):
 *      all MPI_Irecv posted, then all MPI_Isend, completed with MPI_Waitall;
 *   B. the same exchange, receives completed one at a time with MPI_Waitany
 *      (each checked as soon as it lands), sends with an MPI_Testsome loop;
 *   C. MPI_Sendrecv: at every distance d, send to rank+d, receive from rank-d;
 *   D. MPI_Sendrecv_replace: a buffer shifted around the ring size times, so
 *      it comes back to its owner.
 *
 * Each pattern runs with small (eager) and large (rendezvous) messages; every
 * element of every payload is checked, and a request must complete exactly
 * once.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static const int counts[] = {1, 1000, 50000};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

static int rank, size;

static int value(int src, int dst, int i, int round)
{
    return src * 1000003 + dst * 7919 + i * 31 + round * 17;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "nonblocking: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static int check(const int *buf, int count, int src, int dst, int round,
                 const char *what)
{
    for (int i = 0; i < count; i++) {
        if (buf[i] != value(src, dst, i, round)) {
            fprintf(stderr, "nonblocking: rank %d %s: message %d->%d "
                    "(%d ints, round %d): element %d is %d, expected %d\n",
                    rank, what, src, dst, count, round, i, buf[i],
                    value(src, dst, i, round));
            return 1;
        }
    }
    return 0;
}

/* Patterns A (use_waitany = 0) and B (use_waitany = 1). */
static int exchange(int count, int round, int use_waitany)
{
    const char *what = use_waitany ? "Waitany/Testsome" : "Waitall";
    int failed = 0;
    int **sbuf = xmalloc((size_t)size * sizeof *sbuf);
    int **rbuf = xmalloc((size_t)size * sizeof *rbuf);
    MPI_Request *rreq = xmalloc((size_t)size * sizeof *rreq);
    MPI_Request *sreq = xmalloc((size_t)size * sizeof *sreq);
    int *done = xmalloc((size_t)size * sizeof *done);

    for (int p = 0; p < size; p++) {
        rbuf[p] = xmalloc((size_t)count * sizeof(int));
        for (int i = 0; i < count; i++)
            rbuf[p][i] = -1;
        MPI_Irecv(rbuf[p], count, MPI_INT, p, round, MPI_COMM_WORLD, &rreq[p]);
    }
    for (int k = 0; k < size; k++) {
        /* Stagger destinations so that not everyone sends to rank 0 first. */
        int p = (rank + k) % size;
        sbuf[p] = xmalloc((size_t)count * sizeof(int));
        for (int i = 0; i < count; i++)
            sbuf[p][i] = value(rank, p, i, round);
        MPI_Isend(sbuf[p], count, MPI_INT, p, round, MPI_COMM_WORLD, &sreq[p]);
    }

    if (!use_waitany) {
        MPI_Status *st = xmalloc((size_t)size * sizeof *st);
        MPI_Waitall(size, rreq, st);
        for (int p = 0; p < size; p++) {
            int got;
            MPI_Get_count(&st[p], MPI_INT, &got);
            if (st[p].MPI_SOURCE != p || st[p].MPI_TAG != round ||
                got != count) {
                fprintf(stderr, "nonblocking: rank %d %s: status (%d, %d, %d) "
                        "for receive from %d\n", rank, what, st[p].MPI_SOURCE,
                        st[p].MPI_TAG, got, p);
                failed = 1;
            }
            failed |= check(rbuf[p], count, p, rank, round, what);
        }
        MPI_Waitall(size, sreq, st);
        free(st);
    } else {
        for (int p = 0; p < size; p++)
            done[p] = 0;
        for (int n = 0; n < size; n++) {
            int idx;
            MPI_Status st;
            MPI_Waitany(size, rreq, &idx, &st);
            if (idx == MPI_UNDEFINED || idx < 0 || idx >= size || done[idx]) {
                fprintf(stderr, "nonblocking: rank %d: MPI_Waitany returned "
                        "index %d\n", rank, idx);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            done[idx] = 1;
            if (rreq[idx] != MPI_REQUEST_NULL) {
                fprintf(stderr, "nonblocking: rank %d: MPI_Waitany left the "
                        "request non-null\n", rank);
                failed = 1;
            }
            if (st.MPI_SOURCE != idx) {
                fprintf(stderr, "nonblocking: rank %d: request %d completed "
                        "with source %d\n", rank, idx, st.MPI_SOURCE);
                failed = 1;
            }
            failed |= check(rbuf[idx], count, idx, rank, round, what);
        }
        /* All receives are complete; Waitany on null requests says so. */
        int idx;
        MPI_Waitany(size, rreq, &idx, MPI_STATUS_IGNORE);
        if (idx != MPI_UNDEFINED) {
            fprintf(stderr, "nonblocking: rank %d: MPI_Waitany on completed "
                    "requests returned %d, not MPI_UNDEFINED\n", rank, idx);
            failed = 1;
        }

        for (int p = 0; p < size; p++)
            done[p] = 0;
        int completed = 0;
        int *indices = xmalloc((size_t)size * sizeof *indices);
        /* Real statuses rather than MPI_STATUSES_IGNORE: GCC's
         * -Wstringop-overflow misreads that constant with some mpi.h. */
        MPI_Status *sst = xmalloc((size_t)size * sizeof *sst);
        while (completed < size) {
            int outcount;
            MPI_Testsome(size, sreq, &outcount, indices, sst);
            if (outcount == MPI_UNDEFINED) {
                fprintf(stderr, "nonblocking: rank %d: MPI_Testsome says no "
                        "active request with %d of %d done\n", rank,
                        completed, size);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            for (int j = 0; j < outcount; j++) {
                int i = indices[j];
                if (i < 0 || i >= size || done[i]) {
                    fprintf(stderr, "nonblocking: rank %d: MPI_Testsome "
                            "returned index %d twice or out of range\n", rank,
                            i);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                done[i] = 1;
                completed++;
            }
        }
        int outcount;
        MPI_Testsome(size, sreq, &outcount, indices, sst);
        if (outcount != MPI_UNDEFINED) {
            fprintf(stderr, "nonblocking: rank %d: MPI_Testsome on completed "
                    "requests returned %d, not MPI_UNDEFINED\n", rank,
                    outcount);
            failed = 1;
        }
        free(indices);
        free(sst);
    }

    for (int p = 0; p < size; p++) {
        free(sbuf[p]);
        free(rbuf[p]);
    }
    free(sbuf);
    free(rbuf);
    free(rreq);
    free(sreq);
    free(done);
    return failed;
}

/* Pattern C. */
static int sendrecv_shift(int count, int round)
{
    int failed = 0;
    int *s = xmalloc((size_t)count * sizeof(int));
    int *r = xmalloc((size_t)count * sizeof(int));
    for (int d = 0; d < size; d++) {
        int to = (rank + d) % size, from = (rank + size - d) % size;
        for (int i = 0; i < count; i++) {
            s[i] = value(rank, to, i, round + d);
            r[i] = -1;
        }
        MPI_Status st;
        MPI_Sendrecv(s, count, MPI_INT, to, d, r, count, MPI_INT, from, d,
                     MPI_COMM_WORLD, &st);
        if (st.MPI_SOURCE != from || st.MPI_TAG != d) {
            fprintf(stderr, "nonblocking: rank %d: MPI_Sendrecv status (%d, "
                    "%d), expected (%d, %d)\n", rank, st.MPI_SOURCE, st.MPI_TAG,
                    from, d);
            failed = 1;
        }
        failed |= check(r, count, from, rank, round + d, "Sendrecv");
    }
    free(s);
    free(r);
    return failed;
}

/* Pattern D: after k shifts, rank holds the buffer that started on rank-k. */
static int sendrecv_replace_ring(int count, int round)
{
    int failed = 0;
    int *b = xmalloc((size_t)count * sizeof(int));
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    for (int i = 0; i < count; i++)
        b[i] = value(rank, rank, i, round);
    for (int k = 1; k <= size; k++) {
        MPI_Sendrecv_replace(b, count, MPI_INT, to, k, from, k,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int owner = (rank + size - k % size) % size;
        /* No early exit: the neighbours are still shifting. */
        failed |= check(b, count, owner, owner, round, "Sendrecv_replace");
    }
    free(b);
    return failed;
}

int main(int argc, char **argv)
{
    int failed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    static const char *const names[] = {"Irecv/Isend+Waitall",
                                        "Waitany/Testsome", "Sendrecv",
                                        "Sendrecv_replace"};
    for (int pat = 0; pat < 4 && !failed; pat++) {
        for (int c = 0; c < NCOUNTS; c++) {
            int round = pat * 10 + c;
            int f;
            switch (pat) {
            case 0: f = exchange(counts[c], round, 0); break;
            case 1: f = exchange(counts[c], round, 1); break;
            case 2: f = sendrecv_shift(counts[c], round); break;
            default: f = sendrecv_replace_ring(counts[c], round); break;
            }
            int any = 0;
            MPI_Allreduce(&f, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any) {
                failed = 1;
                break;
            }
        }
        if (rank == 0 && !failed)
            printf("nonblocking: %-20s ok for %d, %d and %d ints\n",
                   names[pat], counts[0], counts[1], counts[2]);
    }

    if (rank == 0 && !failed)
        printf("nonblocking: OK (%d ranks)\n", size);
    MPI_Finalize();
    return failed ? 1 : 0;
}
