/* basic.c - environment calls: init/finalize state, versions, thread level,
 * processor name, timers, rank/size, predefined attributes, Alloc_mem.
 * Any number of ranks. */
#include "common.h"

static int get_int_attr(int keyval, int *value)
{
    int *p = NULL;
    int flag = -1;
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, keyval, &p, &flag));
    CHECK(flag == 0 || flag == 1);
    if (flag) {
        CHECK(p != NULL);
        *value = *p;
    }
    return flag;
}

int main(int argc, char **argv)
{
    int flag = -1, provided = -1, v = 0, sv = -1, len = -1;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];

    /* Allowed before MPI_Init. */
    MPI_OK(MPI_Initialized(&flag));
    CHECK(flag == 0);
    MPI_OK(MPI_Finalized(&flag));
    CHECK(flag == 0);
    MPI_OK(MPI_Get_version(&v, &sv));
    CHECK(v >= 3 && sv >= 0);
    MPI_OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING);
    CHECK((size_t)len == strlen(lib));
    int ec = -1;
    MPI_OK(MPI_Error_class(MPI_ERR_BUFFER, &ec));
    CHECK(ec == MPI_ERR_BUFFER);
    /* info objects (MPI-4.0) */
    MPI_Info pre = MPI_INFO_NULL;
    MPI_OK(MPI_Info_create(&pre));
    MPI_OK(MPI_Info_set(pre, "key", "value"));
    MPI_OK(MPI_Info_free(&pre));
    /* MPI_Info_create_env: the same object before and after MPI_Init (MPICH's
     * info/infocreateenv); maxprocs, when given, is the job's size */
    char maxprocs_pre[MPI_MAX_INFO_VAL] = "";
    int mp_flag_pre = 0;
    {
        MPI_Info env = MPI_INFO_NULL;
        int vl = MPI_MAX_INFO_VAL;
        MPI_OK(MPI_Info_create_env(argc, argv, &env));
        MPI_OK(MPI_Info_get_string(env, "maxprocs", &vl, maxprocs_pre, &mp_flag_pre));
        MPI_OK(MPI_Info_free(&env));
    }
#if MPI_VERSION >= 5
    /* the ABI queries (MPI-5.0) */
    int am = -1, an = -1;
    MPI_OK(MPI_Abi_get_version(&am, &an));
    CHECKF(am == MPI_ABI_VERSION && an == MPI_ABI_SUBVERSION, "ABI %d.%d", am, an);
    MPI_Info ai = MPI_INFO_NULL;
    MPI_OK(MPI_Abi_get_info(&ai));
    const struct {
        const char *key;
        int size;
    } sizes[] = {{"mpi_aint_size", (int)sizeof(MPI_Aint)},
                 {"mpi_count_size", (int)sizeof(MPI_Count)},
                 {"mpi_offset_size", (int)sizeof(MPI_Offset)}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char val[MPI_MAX_INFO_VAL];
        int vl = (int)sizeof val, found = 0;
        MPI_OK(MPI_Info_get_string(ai, sizes[k].key, &vl, val, &found));
        CHECKF(found && atoi(val) == sizes[k].size, "%s = %s", sizes[k].key, found ? val : "-");
    }
    MPI_OK(MPI_Info_free(&ai));
    MPI_OK(MPI_Abi_get_fortran_info(&ai));
    if (ai != MPI_INFO_NULL)
        MPI_OK(MPI_Info_free(&ai));
#endif
    /* the tool interface: supported or not, it returns (never aborts; MPICH 4.2 then
     * crashes in MPI_Init_thread) */
    if (is_madmpi()) {
        int tp = -1;
        if (MPI_T_init_thread(MPI_THREAD_SINGLE, &tp) == MPI_SUCCESS)
            MPI_OK(MPI_T_finalize());
    }

    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &t_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &t_size));
    CHECK(t_rank >= 0 && t_rank < t_size);
    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
          provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE);
    int q = -1;
    MPI_OK(MPI_Query_thread(&q));
    CHECK(q == provided);
    MPI_OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1);
    MPI_OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    MPI_OK(MPI_Finalized(&flag));
    CHECK(flag == 0);

    int madmpi = is_madmpi();
    if (madmpi) {
        CHECKF(v == 5 && sv == 0, "version %d.%d", v, sv);
        CHECK(provided == MPI_THREAD_MULTIPLE);
        CHECKF(strstr(lib, "MPI 5.0") != NULL, "library version '%s'", lib);
    }

    {
        MPI_Info env = MPI_INFO_NULL;
        char mp[MPI_MAX_INFO_VAL] = "";
        int vl = MPI_MAX_INFO_VAL, mp_flag = 0;
        MPI_OK(MPI_Info_create_env(argc, argv, &env));
        MPI_OK(MPI_Info_get_string(env, "maxprocs", &vl, mp, &mp_flag));
        MPI_OK(MPI_Info_free(&env));
        CHECKF(mp_flag == mp_flag_pre && strcmp(mp, maxprocs_pre) == 0,
               "maxprocs before MPI_Init '%s' (%d), after '%s' (%d)", maxprocs_pre, mp_flag_pre,
               mp, mp_flag);
        if (mp_flag)
            CHECKF(atoi(mp) == t_size, "maxprocs %s in a job of %d", mp, t_size);
    }

    int self_rank = -1, self_size = -1;
    MPI_OK(MPI_Comm_rank(MPI_COMM_SELF, &self_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_SELF, &self_size));
    CHECK(self_rank == 0 && self_size == 1);

    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 'x', sizeof name);
    MPI_OK(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME);
    CHECK((size_t)len == strlen(name));

    double t0 = MPI_Wtime();
    double tick = MPI_Wtick();
    CHECKF(tick > 0.0 && tick < 1.0, "tick %g", tick);
    double t1 = t0;
    while (t1 <= t0)
        t1 = MPI_Wtime();
    CHECK(t1 > t0);

    /* Predefined attributes of MPI_COMM_WORLD. */
    int val = 0;
    CHECK(get_int_attr(MPI_TAG_UB, &val) == 1);
    CHECKF(val >= 32767, "tag ub %d", val);
    if (madmpi)
        CHECK(val == 2147483647);
    CHECK(get_int_attr(MPI_HOST, &val) == 1);
    CHECKF(val == MPI_PROC_NULL || (val >= 0 && val < t_size), "host %d", val);
    CHECK(get_int_attr(MPI_IO, &val) == 1);
    CHECKF(val == MPI_ANY_SOURCE || val == MPI_PROC_NULL || (val >= 0 && val < t_size), "io %d", val);
    if (madmpi)
        CHECK(val == MPI_ANY_SOURCE);
    CHECK(get_int_attr(MPI_WTIME_IS_GLOBAL, &val) == 1);
    CHECKF(val == 0 || val == 1, "wtime_is_global %d", val);
    if (get_int_attr(MPI_APPNUM, &val))
        CHECKF(val >= 0, "appnum %d", val);
    if (get_int_attr(MPI_UNIVERSE_SIZE, &val))
        CHECKF(val >= t_size, "universe size %d < %d", val, t_size);
    CHECK(get_int_attr(MPI_LASTUSEDCODE, &val) == 1);
    CHECKF(val >= MPI_ERR_LASTCODE || !madmpi, "lastusedcode %d", val);
    /* They are on MPI_COMM_SELF too in madmpi and MPICH. */
    {
        int *p = NULL;
        MPI_OK(MPI_Comm_get_attr(MPI_COMM_SELF, MPI_TAG_UB, &p, &flag));
        CHECK(flag == 1 && p != NULL && *p >= 32767);
    }

    /* Alloc_mem / Free_mem. */
    unsigned char *mem = NULL;
    MPI_OK(MPI_Alloc_mem(1 << 20, MPI_INFO_NULL, &mem));
    CHECK(mem != NULL);
    memset(mem, 0x5a, 1 << 20);
    CHECK(mem[12345] == 0x5a);
    MPI_OK(MPI_Free_mem(mem));
    void *zero = NULL;
    MPI_OK(MPI_Alloc_mem(0, MPI_INFO_NULL, &zero));
    MPI_OK(MPI_Free_mem(zero));

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Barrier(MPI_COMM_SELF));
    if (t_rank == 0) {
        printf("OK basic\n");
        fflush(stdout);
    }
    MPI_OK(MPI_Finalize());
    MPI_Finalized(&flag);
    if (flag != 1)
        return 4;
    MPI_Initialized(&flag);
    if (flag != 1)
        return 5;
    /* Still allowed after MPI_Finalize. */
    if (MPI_Get_version(&v, &sv) != MPI_SUCCESS)
        return 6;
    return 0;
}
