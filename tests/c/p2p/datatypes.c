/* datatypes.c - every predefined datatype sent and received (rank 0 -> 1
 * and back): the data bytes arrive, Get_count and Get_elements answer the
 * element counts (pair types are two elements each), and the gap of the
 * pair types (e.g. MPI_DOUBLE_INT: 12 bytes of data in a 16-byte struct) is
 * neither sent nor written.  Exactly 2 ranks. */
#include "common.h"
#include <stddef.h>

#define N 5

struct tdesc {
    MPI_Datatype t;
    const char *name;
    int size;    /* bytes of data per element */
    int extent;  /* bytes per element in memory */
    int elems;   /* basic elements per element */
    int off[2];  /* data runs within an element */
    int len[2];
};

struct fi { float a; int b; };
struct di { double a; int b; };
struct li { long a; int b; };
struct ii { int a; int b; };
struct si { short a; int b; };
struct ldi { long double a; int b; };
struct ff { float a; float b; };
struct dd { double a; double b; };

#define SC(T, n) { T, #T, (int)(n), (int)(n), 1, {0, 0}, {(int)(n), 0} }
#define PAIR(T, S)                                                                 \
    { T, #T, (int)(sizeof(((struct S *)0)->a) + sizeof(((struct S *)0)->b)), (int)sizeof(struct S), 2, \
      {(int)offsetof(struct S, a), (int)offsetof(struct S, b)},                    \
      {(int)sizeof(((struct S *)0)->a), (int)sizeof(((struct S *)0)->b)} }

static const struct tdesc types[] = {
    SC(MPI_CHAR, sizeof(char)),
    SC(MPI_SIGNED_CHAR, sizeof(signed char)),
    SC(MPI_UNSIGNED_CHAR, sizeof(unsigned char)),
    SC(MPI_BYTE, 1),
    SC(MPI_PACKED, 1),
    SC(MPI_SHORT, sizeof(short)),
    SC(MPI_UNSIGNED_SHORT, sizeof(unsigned short)),
    SC(MPI_INT, sizeof(int)),
    SC(MPI_UNSIGNED, sizeof(unsigned)),
    SC(MPI_LONG, sizeof(long)),
    SC(MPI_UNSIGNED_LONG, sizeof(unsigned long)),
    SC(MPI_LONG_LONG, sizeof(long long)),
    SC(MPI_LONG_LONG_INT, sizeof(long long)),
    SC(MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long)),
    SC(MPI_FLOAT, sizeof(float)),
    SC(MPI_DOUBLE, sizeof(double)),
    SC(MPI_LONG_DOUBLE, sizeof(long double)),
    SC(MPI_WCHAR, sizeof(wchar_t)),
    SC(MPI_C_BOOL, sizeof(_Bool)),
    SC(MPI_INT8_T, 1),
    SC(MPI_INT16_T, 2),
    SC(MPI_INT32_T, 4),
    SC(MPI_INT64_T, 8),
    SC(MPI_UINT8_T, 1),
    SC(MPI_UINT16_T, 2),
    SC(MPI_UINT32_T, 4),
    SC(MPI_UINT64_T, 8),
    SC(MPI_AINT, sizeof(MPI_Aint)),
    SC(MPI_OFFSET, sizeof(MPI_Offset)),
    SC(MPI_COUNT, sizeof(MPI_Count)),
    SC(MPI_C_COMPLEX, sizeof(float _Complex)),
    SC(MPI_C_FLOAT_COMPLEX, sizeof(float _Complex)),
    SC(MPI_C_DOUBLE_COMPLEX, sizeof(double _Complex)),
    SC(MPI_C_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex)),
    SC(MPI_CXX_BOOL, 1),
    SC(MPI_CXX_FLOAT_COMPLEX, sizeof(float _Complex)),
    SC(MPI_CXX_DOUBLE_COMPLEX, sizeof(double _Complex)),
    SC(MPI_CXX_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex)),
    SC(MPI_LOGICAL, 4),
    SC(MPI_INTEGER, 4),
    SC(MPI_REAL, 4),
    SC(MPI_DOUBLE_PRECISION, 8),
    SC(MPI_COMPLEX, 8),
    SC(MPI_DOUBLE_COMPLEX, 16),
    SC(MPI_CHARACTER, 1),
#ifdef MPI_LOGICAL1 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_LOGICAL1, 1),
#endif
#ifdef MPI_LOGICAL2 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_LOGICAL2, 2),
#endif
#ifdef MPI_LOGICAL4 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_LOGICAL4, 4),
#endif
#ifdef MPI_LOGICAL8 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_LOGICAL8, 8),
#endif
#ifdef MPI_LOGICAL16 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_LOGICAL16, 16),
#endif
    SC(MPI_INTEGER1, 1),
    SC(MPI_INTEGER2, 2),
    SC(MPI_INTEGER4, 4),
    SC(MPI_INTEGER8, 8),
    SC(MPI_INTEGER16, 16),
#ifdef MPI_REAL2 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_REAL2, 2),
#endif
    SC(MPI_REAL4, 4),
    SC(MPI_REAL8, 8),
    SC(MPI_REAL16, 16),
#ifdef MPI_COMPLEX4 /* not in every mpi.h (MPICH 4.0 lacks it) */
    SC(MPI_COMPLEX4, 4),
#endif
    SC(MPI_COMPLEX8, 8),
    SC(MPI_COMPLEX16, 16),
    SC(MPI_COMPLEX32, 32),
    PAIR(MPI_FLOAT_INT, fi),
    PAIR(MPI_DOUBLE_INT, di),
    PAIR(MPI_LONG_INT, li),
    PAIR(MPI_2INT, ii),
    PAIR(MPI_SHORT_INT, si),
    PAIR(MPI_LONG_DOUBLE_INT, ldi),
    PAIR(MPI_2REAL, ff),
    PAIR(MPI_2DOUBLE_PRECISION, dd),
    PAIR(MPI_2INTEGER, ii),
};

/* Whether byte j of an element is data. */
static int is_data(const struct tdesc *d, int j)
{
    for (int m = 0; m < 2; m++)
        if (j >= d->off[m] && j < d->off[m] + d->len[m])
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    CHECK(t_size == 2);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    const int ntypes = (int)(sizeof types / sizeof types[0]);
    int tested = 0;
    int madmpi = is_madmpi();
    unsigned char buf[N * 64], ref[N * 64];

    for (int k = 0; k < ntypes; k++) {
        const struct tdesc *d = &types[k];
        if (d->t == MPI_DATATYPE_NULL)
            continue; /* not supported by this MPI (MPICH without some Fortran types) */
        int sz = 0;
        if (MPI_Type_size(d->t, &sz) == MPI_SUCCESS)
            CHECKF(sz == d->size, "%s: MPI_Type_size %d, expected %d", d->name, sz, d->size);
        size_t span = (size_t)N * (size_t)d->extent;
        /* reference: data bytes patterned, gap bytes 0xcc */
        for (size_t i = 0; i < span; i++)
            ref[i] = is_data(d, (int)(i % (size_t)d->extent)) ? pat(i, (unsigned)k, 7) : 0xcc;
        for (int dir = 0; dir < 2; dir++) {
            int from = dir, to = 1 - dir;
            if (t_rank == from) {
                memcpy(buf, ref, span);
                MPI_OK(MPI_Send(buf, N, d->t, to, k, MPI_COMM_WORLD));
            } else {
                MPI_Status st;
                memset(buf, 0xab, sizeof buf);
                MPI_OK(MPI_Recv(buf, N, d->t, from, k, MPI_COMM_WORLD, &st));
                int cnt = -1, el = -1;
                MPI_OK(MPI_Get_count(&st, d->t, &cnt));
                CHECKF(cnt == N, "%s: count %d", d->name, cnt);
                /* (MPICH 4.0 divides by zero in Get_elements on pair types.) */
                if (d->elems == 1 || madmpi) {
                    MPI_OK(MPI_Get_elements(&st, d->t, &el));
                    CHECKF(el == N * d->elems, "%s: elements %d, expected %d", d->name, el, N * d->elems);
                }
                MPI_OK(MPI_Get_count(&st, MPI_BYTE, &cnt));
                CHECKF(cnt == N * d->size, "%s: %d bytes, expected %d", d->name, cnt, N * d->size);
                for (size_t i = 0; i < span; i++) {
                    int data = is_data(d, (int)(i % (size_t)d->extent));
                    unsigned char want = data ? ref[i] : 0xab;
                    CHECKF(buf[i] == want, "%s: byte %zu (%s) is %#x, expected %#x", d->name, i, data ? "data" : "gap",
                           buf[i], want);
                }
                CHECKF(buf[span] == 0xab, "%s: wrote past the last element", d->name);
            }
        }
        tested++;
    }
    if (t_rank == 0 && madmpi)
        CHECKF(tested == ntypes, "only %d of %d types tested", tested, ntypes);

    /* A partial element is MPI_UNDEFINED for Get_count and counts the whole
     * basic elements for Get_elements: 1.5 MPI_2INT = 12 bytes = 3 ints. */
    if (t_rank == 0) {
        int v[3] = {1, 2, 3};
        MPI_OK(MPI_Send(v, 3, MPI_INT, 1, 999, MPI_COMM_WORLD));
    } else {
        struct ii p[2];
        MPI_Status st;
        int cnt = 0;
        MPI_OK(MPI_Recv(p, 2, MPI_2INT, 0, 999, MPI_COMM_WORLD, &st));
        MPI_OK(MPI_Get_count(&st, MPI_2INT, &cnt));
        CHECK(cnt == MPI_UNDEFINED);
        if (is_madmpi()) {
            MPI_OK(MPI_Get_elements(&st, MPI_2INT, &cnt));
            CHECK(cnt == 3);
        }
        CHECK(p[0].a == 1 && p[0].b == 2 && p[1].a == 3);
    }

    t_done("datatypes");
    return 0;
}
