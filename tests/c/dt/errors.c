/* errors.c - bad input to the datatype functions, with MPI_ERRORS_RETURN on
 * MPI_COMM_WORLD and MPI_COMM_SELF: every call returns an error of the
 * expected class, writes no output, and the library keeps working.
 *
 * Where the standard leaves the class open, or MPICH 4.0 (used to check
 * these tests) does not detect the error, the class is checked for madmpi
 * only (see the comments); other libraries must then report some error or,
 * where marked, may accept the call.
 *
 * 1 rank or more (each rank checks on its own). */
#include "../p2p/common.h"
#include <limits.h>

/* madmpi: class `cls`; another library: any error. */
#define EXPECT_MAD(call, cls)                                                 \
    do {                                                                      \
        if (is_madmpi())                                                      \
            EXPECT_CLASS(call, cls);                                          \
        else                                                                  \
            CHECKF((call) != MPI_SUCCESS, "%s succeeded", #call);             \
    } while (0)

/* madmpi: class `cls`; another library: not checked (it may not detect this). */
#define EXPECT_MAD_ONLY(call, cls)                                            \
    do {                                                                      \
        if (is_madmpi())                                                      \
            EXPECT_CLASS(call, cls);                                          \
    } while (0)

static void constructors(void)
{
    MPI_Datatype t = MPI_DATATYPE_NULL, big = MPI_DATATYPE_NULL, huge = MPI_DATATYPE_NULL;
    int bl[2] = {1, 2}, dp[2] = {0, 4};
    MPI_Aint adp[2] = {0, 8};
    MPI_Datatype ty[2] = {MPI_INT, MPI_DATATYPE_NULL};

    /* negative counts and block lengths */
    EXPECT_CLASS(MPI_Type_contiguous(-1, MPI_INT, &t), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_contiguous_c(-5, MPI_INT, &t), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_vector(-2, 1, 1, MPI_INT, &t), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_vector(2, -1, 1, MPI_INT, &t), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_create_hvector(-3, 1, 8, MPI_INT, &t), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_indexed(-1, bl, dp, MPI_INT, &t), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_create_struct(-1, bl, adp, ty, &t), MPI_ERR_COUNT);
    {
        int nbl[2] = {1, -2};
        /* a negative block length: MPI_ERR_COUNT in madmpi (MPICH says MPI_ERR_ARG) */
        EXPECT_MAD(MPI_Type_indexed(2, nbl, dp, MPI_INT, &t), MPI_ERR_COUNT);
        EXPECT_MAD(MPI_Type_create_hindexed(2, nbl, adp, MPI_INT, &t), MPI_ERR_COUNT);
        EXPECT_MAD(MPI_Type_create_indexed_block(2, -1, dp, MPI_INT, &t), MPI_ERR_COUNT);
    }
    CHECK(t == MPI_DATATYPE_NULL); /* no output on error */

    /* invalid types */
    EXPECT_CLASS(MPI_Type_contiguous(2, MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Type_create_struct(2, bl, adp, ty, &t), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Type_dup(MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE);

    /* bounds that overflow the address range (MPICH does not check) */
    EXPECT_MAD_ONLY(MPI_Type_create_hvector(4, 1, (MPI_Aint)1 << 62, MPI_INT, &t),
                    MPI_ERR_VALUE_TOO_LARGE);
    MPI_OK(MPI_Type_contiguous(1 << 20, MPI_INT, &big));
    MPI_OK(MPI_Type_contiguous(1 << 12, big, &huge)); /* 2^34 bytes */
    EXPECT_MAD_ONLY(MPI_Type_vector(1 << 30, 1, 1 << 30, huge, &t), MPI_ERR_VALUE_TOO_LARGE);
    EXPECT_MAD_ONLY(MPI_Type_create_resized(MPI_INT, LONG_MAX - 4, 16, &t),
                    MPI_ERR_VALUE_TOO_LARGE);
    CHECK(t == MPI_DATATYPE_NULL || !is_madmpi());
    t = MPI_DATATYPE_NULL;

    /* a size that does not fit an int */
    int s = 0;
    MPI_OK(MPI_Type_size(huge, &s));
    CHECK(s == MPI_UNDEFINED);
    EXPECT_MAD_ONLY(MPI_Pack_size(2, huge, MPI_COMM_WORLD, &s), MPI_ERR_VALUE_TOO_LARGE);
    MPI_OK(MPI_Type_free(&huge));
    MPI_OK(MPI_Type_free(&big));

    /* subarray and darray arguments */
    int sizes[2] = {4, 4}, subs[2] = {2, 2}, starts[2] = {1, 1}, bad_starts[2] = {3, 0};
    EXPECT_CLASS(MPI_Type_create_subarray(2, sizes, subs, starts, 77, MPI_INT, &t), MPI_ERR_ARG);
    EXPECT_MAD_ONLY(MPI_Type_create_subarray(2, sizes, subs, bad_starts, MPI_ORDER_C, MPI_INT, &t),
                    MPI_ERR_ARG);
    EXPECT_MAD(MPI_Type_create_subarray(-1, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t),
               MPI_ERR_ARG);
    int gs[2] = {8, 8}, di[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK},
        da[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, ps[2] = {2, 2};
    /* a 2x2 process grid for 3 processes, a bad distribution (MPICH 4.0 crashes on both) */
    EXPECT_MAD_ONLY(MPI_Type_create_darray(3, 0, 2, gs, di, da, ps, MPI_ORDER_C, MPI_INT, &t),
                    MPI_ERR_ARG);
    int bad_di[2] = {MPI_DISTRIBUTE_BLOCK, 1234};
    EXPECT_MAD_ONLY(MPI_Type_create_darray(4, 0, 2, gs, bad_di, da, ps, MPI_ORDER_C, MPI_INT, &t),
                    MPI_ERR_ARG);

    /* NULL output (madmpi: MPI_ERR_ARG) */
    EXPECT_MAD_ONLY(MPI_Type_contiguous(2, MPI_INT, NULL), MPI_ERR_ARG);

    /* the Fortran and lookup functions */
    EXPECT_MAD(MPI_Type_create_f90_real(100, 10000, &t), MPI_ERR_ARG);
    EXPECT_MAD(MPI_Type_create_f90_integer(100, &t), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &t), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Type_match_size(12345, 4, &t), MPI_ERR_ARG);
    CHECK(t == MPI_DATATYPE_NULL);
}

static void freeing(void)
{
    MPI_Datatype t = MPI_INT;
    EXPECT_CLASS(MPI_Type_free(&t), MPI_ERR_TYPE);
    CHECK(t == MPI_INT);
    t = MPI_DATATYPE_NULL;
    EXPECT_CLASS(MPI_Type_free(&t), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Type_commit(&t), MPI_ERR_TYPE);

    /* a handle used after MPI_Type_free (through a copy of it) */
    MPI_OK(MPI_Type_contiguous(2, MPI_INT, &t));
    MPI_OK(MPI_Type_commit(&t));
    MPI_Datatype stale = t;
    MPI_OK(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL);
    int buf[4] = {0, 0, 0, 0}, sz = 0;
    /* using a freed handle is erroneous: madmpi detects it, others may crash */
    EXPECT_MAD_ONLY(MPI_Send(buf, 1, stale, t_rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT_MAD_ONLY(MPI_Type_size(stale, &sz), MPI_ERR_TYPE);
    EXPECT_MAD_ONLY(MPI_Type_free(&stale), MPI_ERR_TYPE);

    /* the f90 types are predefined: they cannot be freed (MPICH frees them) */
    MPI_Datatype r;
    MPI_OK(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r));
    EXPECT_MAD_ONLY(MPI_Type_free(&r), MPI_ERR_TYPE);
}

static void communication(void)
{
    int buf[8] = {0}, rbuf[8] = {0};
    MPI_Datatype u;
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &u)); /* not committed */
    EXPECT_CLASS(MPI_Send(buf, 1, u, t_rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Isend(buf, 1, u, t_rank, 0, MPI_COMM_WORLD, &q), MPI_ERR_TYPE);
    CHECK(q == MPI_REQUEST_NULL);
    EXPECT_CLASS(MPI_Recv(rbuf, 1, u, t_rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Irecv(rbuf, 1, u, t_rank, 0, MPI_COMM_WORLD, &q), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Send(buf, 1, MPI_DATATYPE_NULL, t_rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Send(buf, -1, MPI_INT, t_rank, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    MPI_OK(MPI_Type_free(&u));
    MPI_Status st;
    memset(&st, 0, sizeof st);
    int n;
    EXPECT_CLASS(MPI_Get_elements(&st, MPI_DATATYPE_NULL, &n), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Get_count(&st, MPI_DATATYPE_NULL, &n), MPI_ERR_TYPE);
}

static void packing(void)
{
    int in[10] = {0}, pos = 0, s = 0;
    char out[8];
    MPI_Datatype u;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &u)); /* not committed */
    EXPECT_CLASS(MPI_Pack(in, 1, u, out, 8, &pos, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Pack(in, -1, MPI_INT, out, 8, &pos, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Pack_size(-1, MPI_INT, MPI_COMM_WORLD, &s), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Pack_size(1, MPI_DATATYPE_NULL, MPI_COMM_WORLD, &s), MPI_ERR_TYPE);
    MPI_OK(MPI_Type_free(&u));

    /* an output buffer too small: MPI_ERR_TRUNCATE and nothing written in madmpi; MPICH 4.0
     * packs what fits and succeeds */
    pos = 0;
    memset(out, 0x77, sizeof out);
    EXPECT_MAD_ONLY(MPI_Pack(in, 10, MPI_INT, out, 8, &pos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
    if (is_madmpi())
        CHECK(pos == 0 && out[0] == 0x77);
    pos = 6;
    EXPECT_MAD_ONLY(MPI_Pack(in, 1, MPI_INT, out, 8, &pos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
    /* an input buffer too short */
    pos = 0;
    EXPECT_MAD_ONLY(MPI_Unpack(out, 4, &pos, in, 2, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
    if (is_madmpi())
        CHECK(pos == 0);
    /* a position past the end, even for nothing (Open MPI's class too; MPICH 4.0 does not
     * check) */
    pos = 6;
    EXPECT_MAD_ONLY(MPI_Unpack(out, 4, &pos, in, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
    EXPECT_MAD_ONLY(MPI_Unpack(out, 4, &pos, in, 0, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
    if (is_madmpi())
        CHECK(pos == 6);

    /* external32 */
    MPI_Aint apos = 0, asz = 0;
    EXPECT_MAD_ONLY(MPI_Pack_external("native", in, 1, MPI_INT, out, 8, &apos),
                    MPI_ERR_UNSUPPORTED_DATAREP);
    if (is_madmpi()) {
        /* its string speaks of data representations, not of MPI_FILE_SET_VIEW */
        char es[MPI_MAX_ERROR_STRING];
        int el = 0;
        MPI_OK(MPI_Error_string(MPI_Pack_external("native", in, 1, MPI_INT, out, 8, &apos), es,
                                &el));
        CHECKF(strstr(es, "FILE_SET_VIEW") == NULL && strstr(es, "external32") != NULL, "%s", es);
    }
    EXPECT_MAD_ONLY(MPI_Pack_external_size("big-endian", 1, MPI_INT, &asz),
                    MPI_ERR_UNSUPPORTED_DATAREP);
    EXPECT_MAD_ONLY(MPI_Pack_external("external32", in, 3, MPI_INT, out, 8, &apos),
                    MPI_ERR_TRUNCATE);
    if (is_madmpi())
        CHECK(apos == 0);
    EXPECT_CLASS(MPI_Pack_external_size("external32", -1, MPI_INT, &asz), MPI_ERR_COUNT);
}

static void decoding(void)
{
    MPI_Datatype v, c;
    int ints[2];
    MPI_Aint addrs[2];
    MPI_Datatype types[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
    MPI_OK(MPI_Type_vector(3, 2, 4, MPI_INT, &v));
    /* arrays shorter than the envelope (3 integers): madmpi MPI_ERR_ARG (MPICH:
     * MPI_ERR_OTHER) */
    EXPECT_MAD(MPI_Type_get_contents(v, 2, 0, 1, ints, addrs, types), MPI_ERR_ARG);
    EXPECT_MAD(MPI_Type_get_contents(v, 3, 0, 0, ints, addrs, types), MPI_ERR_ARG);
    CHECK(types[0] == MPI_DATATYPE_NULL);
    /* a named type has no contents */
    EXPECT_CLASS(MPI_Type_get_contents(MPI_INT, 2, 2, 2, ints, addrs, types), MPI_ERR_TYPE);
    MPI_OK(MPI_Type_free(&v));

    /* a type made with large counts through the int variants: madmpi MPI_ERR_TYPE (MPICH:
     * MPI_ERR_OTHER) */
    MPI_OK(MPI_Type_contiguous_c(3, MPI_INT, &c));
    int ni, na, nd, comb;
    EXPECT_MAD(MPI_Type_get_envelope(c, &ni, &na, &nd, &comb), MPI_ERR_TYPE);
    EXPECT_MAD(MPI_Type_get_contents(c, 2, 2, 2, ints, addrs, types), MPI_ERR_TYPE);
    MPI_Count lc[1];
    EXPECT_MAD(MPI_Type_get_contents_c(c, 0, 0, 0, 1, ints, addrs, lc, types), MPI_ERR_ARG);
    MPI_OK(MPI_Type_free(&c));
    EXPECT_CLASS(MPI_Type_get_envelope(MPI_DATATYPE_NULL, &ni, &na, &nd, &comb), MPI_ERR_TYPE);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    constructors();
    freeing();
    communication();
    packing();
    decoding();

    /* still working */
    MPI_Datatype t;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &t));
    MPI_OK(MPI_Type_commit(&t));
    int s[3] = {1, 2, 3}, r[3] = {0, 0, 0};
    MPI_OK(MPI_Sendrecv(s, 1, t, t_rank, 1, r, 1, t, t_rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(r[0] == 1 && r[1] == 0 && r[2] == 3);
    MPI_OK(MPI_Type_free(&t));
    t_done("errors");
    return 0;
}
