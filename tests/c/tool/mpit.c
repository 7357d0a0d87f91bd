/* mpit.c - the tool information interface (MPI_T) used as a simple profiler would use it:
 * initialized before MPI_Init and finalized after MPI_Finalize (reference counted),
 * enumerates every control variable, performance variable, category, enumeration, event type
 * and source; reads and writes control variables; starts a performance-variable session
 * around a point-to-point exchange and checks that the counters moved by exactly what was
 * sent; registers event callbacks and checks that they fire, with the right contents; and
 * checks the error codes of bad indices, names, handles and sessions.
 *
 * Needs 2 or more ranks (ranks past 1 only take part in the enumeration).
 */
#include "../p2p/common.h"

#define SMALL 10          /* eager messages rank 0 sends to rank 1 */
#define LARGE 2           /* rendezvous messages */
#define LARGE_BYTES (1 << 20)

#define T_OK(call)                                                            \
    do {                                                                      \
        int rc_ = (call);                                                     \
        CHECKF(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);             \
    } while (0)

#define T_ERR(call, want)                                                     \
    do {                                                                      \
        int rc_ = (call);                                                     \
        CHECKF(rc_ == (want), "%s returned %d, want %d (%s)", #call, rc_,     \
               (int)(want), #want);                                           \
    } while (0)

static int cvar_index(const char *name)
{
    int i = -1;
    T_OK(MPI_T_cvar_get_index(name, &i));
    return i;
}

static int pvar_index(const char *name, int cls)
{
    int i = -1;
    T_OK(MPI_T_pvar_get_index(name, cls, &i));
    return i;
}

/* ---------------------------------------------------------------- events */

static int n_rdv, n_unexp, n_freed, bad_event;
static MPI_Count last_ts = -1;

static void on_event(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety s,
                     void *user)
{
    unsigned long long d[4], e;
    MPI_Count ts;
    int src = -1, k;
    (void)reg;
    (void)s;
    if (MPI_T_event_copy(ev, d) != MPI_SUCCESS || MPI_T_event_get_timestamp(ev, &ts) != MPI_SUCCESS
        || MPI_T_event_get_source(ev, &src) != MPI_SUCCESS || src != 0 || ts < last_ts) {
        bad_event++;
        return;
    }
    last_ts = ts;
    for (k = 0; k < 4; k++)
        if (MPI_T_event_read(ev, k, &e) != MPI_SUCCESS || e != d[k])
            bad_event++;
    if (MPI_T_event_read(ev, 4, &e) != MPI_T_ERR_INVALID_INDEX)
        bad_event++;
    if (*(int *)user == 0) { /* rendezvous: peer, tag, bytes */
        if (d[1] == 2) {
            if (d[0] != 1 || d[2] != LARGE_BYTES)
                bad_event++;
            n_rdv++;
        }
    } else { /* unexpected: source, tag, bytes, held */
        if (d[1] == 1 && d[0] == 0) {
            if (d[2] != 8 || d[3] != 8)
                bad_event++;
            n_unexp++;
        }
    }
}

static void on_free(MPI_T_event_registration reg, MPI_T_cb_safety s, void *user)
{
    (void)reg;
    (void)s;
    (void)user;
    n_freed++;
}

/* ---------------------------------------------------------------- enumeration */

static void enumerate(void)
{
    int ncvar, npvar, ncat, nev, nsrc, i, k;
    char name[256], desc[1024];
    int nlen, dlen, verb, bind, scope, cls, ro, cont, atomic;
    MPI_Datatype dt;
    MPI_T_enum en;
    int *seen_c, *seen_p;

    T_OK(MPI_T_cvar_get_num(&ncvar));
    T_OK(MPI_T_pvar_get_num(&npvar));
    T_OK(MPI_T_category_get_num(&ncat));
    T_OK(MPI_T_event_get_num(&nev));
    T_OK(MPI_T_source_get_num(&nsrc));
    CHECK(ncvar >= 30 && npvar >= 30 && ncat >= 5 && nev == 3 && nsrc == 1);
    seen_c = calloc(ncvar, sizeof(int));
    seen_p = calloc(npvar, sizeof(int));

    for (i = 0; i < ncvar; i++) {
        int back = -1;
        nlen = sizeof name;
        dlen = sizeof desc;
        T_OK(MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope));
        CHECK(nlen == (int)strlen(name) + 1 && dlen == (int)strlen(desc) + 1);
        CHECK(strncmp(name, "MADMPI_", 7) == 0 && dlen > 1);
        CHECK(bind == MPI_T_BIND_NO_OBJECT);
        CHECK(scope == MPI_T_SCOPE_READONLY || scope == MPI_T_SCOPE_LOCAL);
        CHECK(dt == MPI_INT || dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_CHAR);
        CHECK((dt == MPI_INT) == (en != MPI_T_ENUM_NULL));
        if (en != MPI_T_ENUM_NULL) {
            int num, v;
            char ename[64], iname[64];
            int el = sizeof ename, il;
            T_OK(MPI_T_enum_get_info(en, &num, ename, &el));
            CHECK(num >= 2);
            for (k = 0; k < num; k++) {
                il = sizeof iname;
                T_OK(MPI_T_enum_get_item(en, k, &v, iname, &il));
                CHECK(v == k && il > 1);
            }
            il = sizeof iname;
            T_ERR(MPI_T_enum_get_item(en, num, &v, iname, &il), MPI_T_ERR_INVALID_ITEM);
        }
        T_OK(MPI_T_cvar_get_index(name, &back));
        CHECK(back == i);
        /* Only the length asked for: NULL buffer. */
        nlen = 0;
        T_OK(MPI_T_cvar_get_info(i, NULL, &nlen, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
        CHECK(nlen == (int)strlen(name) + 1);
        /* A short buffer: truncated and terminated. */
        nlen = 4;
        T_OK(MPI_T_cvar_get_info(i, name, &nlen, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
        CHECK(nlen == 4 && strlen(name) == 3);
    }
    for (i = 0; i < npvar; i++) {
        int back = -1;
        nlen = sizeof name;
        dlen = sizeof desc;
        T_OK(MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, desc, &dlen, &bind, &ro,
                                 &cont, &atomic));
        CHECK(strncmp(name, "madmpi_", 7) == 0 && dt == MPI_UNSIGNED_LONG_LONG);
        CHECK(en == MPI_T_ENUM_NULL && bind == MPI_T_BIND_NO_OBJECT);
        CHECK(cls == MPI_T_PVAR_CLASS_COUNTER || cls == MPI_T_PVAR_CLASS_LEVEL
              || cls == MPI_T_PVAR_CLASS_HIGHWATERMARK);
        CHECK(ro == (cls != MPI_T_PVAR_CLASS_COUNTER) && cont == ro);
        T_OK(MPI_T_pvar_get_index(name, cls, &back));
        CHECK(back == i);
        T_ERR(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_TIMER, &back), MPI_T_ERR_INVALID_NAME);
    }
    /* Categories: the first holds the others; every variable is in exactly one of those. */
    for (i = 0; i < ncat; i++) {
        int nc, np, nk, ne, back = -1, *idx;
        nlen = sizeof name;
        dlen = sizeof desc;
        T_OK(MPI_T_category_get_info(i, name, &nlen, desc, &dlen, &nc, &np, &nk));
        T_OK(MPI_T_category_get_num_events(i, &ne));
        T_OK(MPI_T_category_get_index(name, &back));
        CHECK(back == i);
        idx = malloc(sizeof(int) * (nc + np + nk + ne + 1));
        if (i == 0) {
            CHECK(nk == ncat - 1 && nc == 0 && np == 0);
            T_OK(MPI_T_category_get_categories(0, nk, idx));
            for (k = 0; k < nk; k++)
                CHECK(idx[k] == k + 1);
        }
        T_OK(MPI_T_category_get_cvars(i, nc, idx));
        for (k = 0; k < nc; k++)
            seen_c[idx[k]]++;
        T_OK(MPI_T_category_get_pvars(i, np, idx));
        for (k = 0; k < np; k++)
            seen_p[idx[k]]++;
        T_OK(MPI_T_category_get_events(i, ne, idx));
        for (k = 0; k < ne; k++)
            CHECK(idx[k] >= 0 && idx[k] < nev);
        free(idx);
    }
    for (i = 0; i < ncvar; i++)
        CHECKF(seen_c[i] == 1, "cvar %d in %d categories", i, seen_c[i]);
    for (i = 0; i < npvar; i++)
        CHECKF(seen_p[i] == 1, "pvar %d in %d categories", i, seen_p[i]);
    free(seen_c);
    free(seen_p);
    for (i = 0; i < nev; i++) {
        MPI_Datatype types[8];
        MPI_Aint disp[8];
        int n = 8, back = -1;
        MPI_Info info = MPI_INFO_NULL;
        nlen = sizeof name;
        dlen = sizeof desc;
        T_OK(MPI_T_event_get_info(i, name, &nlen, &verb, types, disp, &n, &en, &info, desc, &dlen,
                                  &bind));
        CHECK(n == 4 && types[0] == MPI_UNSIGNED_LONG_LONG && disp[3] == 24);
        T_OK(MPI_T_event_get_index(name, &back));
        CHECK(back == i);
        MPI_OK(MPI_Info_free(&info));
    }
    {
        MPI_T_source_order ord;
        MPI_Count tps, max, t1, t2;
        MPI_Info info;
        nlen = sizeof name;
        dlen = sizeof desc;
        T_OK(MPI_T_source_get_info(0, name, &nlen, desc, &dlen, &ord, &tps, &max, &info));
        CHECK(ord == MPI_T_SOURCE_ORDERED && tps == 1000000000);
        MPI_OK(MPI_Info_free(&info));
        T_OK(MPI_T_source_get_timestamp(0, &t1));
        T_OK(MPI_T_source_get_timestamp(0, &t2));
        CHECK(t2 >= t1);
        T_ERR(MPI_T_source_get_timestamp(1, &t1), MPI_T_ERR_INVALID_INDEX);
    }
    /* Bad indices and names. */
    T_ERR(MPI_T_cvar_get_info(-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
          MPI_T_ERR_INVALID_INDEX);
    T_ERR(MPI_T_cvar_get_info(ncvar, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
          MPI_T_ERR_INVALID_INDEX);
    T_ERR(MPI_T_pvar_get_info(npvar, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                              NULL, NULL),
          MPI_T_ERR_INVALID_INDEX);
    T_ERR(MPI_T_category_get_info(ncat, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
          MPI_T_ERR_INVALID_INDEX);
    T_ERR(MPI_T_event_get_info(nev, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                               NULL),
          MPI_T_ERR_INVALID_INDEX);
    T_ERR(MPI_T_cvar_get_index("MADMPI_NO_SUCH", &i), MPI_T_ERR_INVALID_NAME);
    T_ERR(MPI_T_category_get_index("nope", &i), MPI_T_ERR_INVALID_NAME);
    T_ERR(MPI_T_event_get_index("nope", &i), MPI_T_ERR_INVALID_NAME);
}

/* ---------------------------------------------------------------- control variables */

static int read_int_cvar(const char *name)
{
    MPI_T_cvar_handle h;
    int count, v;
    T_OK(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    CHECK(count == 1);
    T_OK(MPI_T_cvar_read(h, &v));
    T_OK(MPI_T_cvar_handle_free(&h));
    CHECK(h == MPI_T_CVAR_HANDLE_NULL);
    return v;
}

static unsigned long long read_u64_cvar(const char *name)
{
    MPI_T_cvar_handle h;
    int count;
    unsigned long long v;
    T_OK(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    T_OK(MPI_T_cvar_read(h, &v));
    T_OK(MPI_T_cvar_handle_free(&h));
    return v;
}

/* Before MPI_Init: readable, not writable yet. */
static void cvars_before_init(void)
{
    MPI_T_cvar_handle h;
    int count, v;
    unsigned long long spin = 77;
    const char *want = getenv("MADMPI_STRATEGY");
    char item[64];
    int il = sizeof item;
    MPI_T_enum en;
    MPI_Datatype dt;

    v = read_int_cvar("MADMPI_STRATEGY");
    T_OK(MPI_T_cvar_get_info(cvar_index("MADMPI_STRATEGY"), NULL, NULL, NULL, &dt, &en, NULL,
                             NULL, NULL, NULL));
    CHECK(dt == MPI_INT);
    T_OK(MPI_T_enum_get_item(en, v, &v, item, &il));
    CHECKF(strcmp(item, want ? want : "adaptive") == 0, "strategy %s", item);
    T_OK(MPI_T_cvar_handle_alloc(cvar_index("MADMPI_SPIN"), NULL, &h, &count));
    T_ERR(MPI_T_cvar_write(h, &spin), MPI_T_ERR_CVAR_SET_NOT_NOW);
    T_OK(MPI_T_cvar_handle_free(&h));
    T_ERR(MPI_T_cvar_handle_free(&h), MPI_T_ERR_INVALID_HANDLE);
}

static void cvars_running(void)
{
    MPI_T_cvar_handle h, hs;
    int count;
    unsigned long long v, old, big = 1ULL << 40;
    char text[256];
    const char *strategy = getenv("MADMPI_STRATEGY");

    /* The spin budget: writable, read back, restored. */
    T_OK(MPI_T_cvar_handle_alloc(cvar_index("MADMPI_SPIN"), NULL, &h, &count));
    T_OK(MPI_T_cvar_read(h, &old));
    v = 123;
    T_OK(MPI_T_cvar_write(h, &v));
    v = 0;
    T_OK(MPI_T_cvar_read(h, &v));
    CHECK(v == 123);
    T_ERR(MPI_T_cvar_write(h, &big), MPI_T_ERR_INVALID);
    T_OK(MPI_T_cvar_write(h, &old));
    T_OK(MPI_T_cvar_handle_free(&h));
    T_ERR(MPI_T_cvar_read(h, &v), MPI_T_ERR_INVALID_HANDLE);
    /* The zero-copy block size. */
    old = read_u64_cvar("MADMPI_ZCOPY_MIN");
    CHECK(old > 0);
    T_OK(MPI_T_cvar_handle_alloc(cvar_index("MADMPI_ZCOPY_MIN"), NULL, &h, &count));
    v = 4096;
    T_OK(MPI_T_cvar_write(h, &v));
    CHECK(read_u64_cvar("MADMPI_ZCOPY_MIN") == 4096);
    T_OK(MPI_T_cvar_write(h, &old));
    T_OK(MPI_T_cvar_handle_free(&h));
    /* A read-only setting: never writable. */
    T_OK(MPI_T_cvar_handle_alloc(cvar_index("MADMPI_SHM_EAGER"), NULL, &h, &count));
    T_OK(MPI_T_cvar_read(h, &v));
    CHECK(v > 0);
    T_ERR(MPI_T_cvar_write(h, &v), MPI_T_ERR_CVAR_SET_NEVER);
    T_OK(MPI_T_cvar_handle_free(&h));
    /* split_balance's parameter: only under split_balance. */
    T_OK(MPI_T_cvar_handle_alloc(cvar_index("MADMPI_SPLIT_BALANCE_MIN"), NULL, &hs, &count));
    v = 128 * 1024;
    if (strategy && strcmp(strategy, "split_balance") == 0) {
        T_OK(MPI_T_cvar_write(hs, &v));
        CHECK(read_u64_cvar("MADMPI_SPLIT_BALANCE_MIN") == v);
    } else {
        T_ERR(MPI_T_cvar_write(hs, &v), MPI_T_ERR_CVAR_SET_NEVER);
    }
    T_OK(MPI_T_cvar_handle_free(&hs));
    /* A text variable: the drivers running. */
    T_OK(MPI_T_cvar_handle_alloc(cvar_index("MADMPI_TRANSPORTS"), NULL, &h, &count));
    CHECK(count == 256);
    T_OK(MPI_T_cvar_read(h, text));
    CHECKF(strncmp(text, "self", 4) == 0, "transports %s", text);
    T_ERR(MPI_T_cvar_write(h, text), MPI_T_ERR_CVAR_SET_NEVER);
    T_OK(MPI_T_cvar_handle_free(&h));
}

/* ---------------------------------------------------------------- performance variables */

enum { EAGER, RDV, PACKETS, CHUNKS, UNEXP, QLEN, QHWM, QBYTES, SHM_PK, TCP_PK, SHM_IN, TCP_IN,
       SHM_PULL, TCP_SENT, NV };

static const char *names[NV] = {
    "madmpi_eager_sends", "madmpi_rendezvous_sends", "madmpi_packets_sent",
    "madmpi_packet_chunks_sent", "madmpi_unexpected_messages",
    "madmpi_unexpected_queue_length", "madmpi_unexpected_queue_length_hwm",
    "madmpi_unexpected_queue_bytes", "madmpi_shm_packets_sent", "madmpi_tcp_packets_sent",
    "madmpi_shm_bytes_received", "madmpi_tcp_bytes_received", "madmpi_shm_bytes_pulled",
    "madmpi_tcp_bytes_sent"};
static const int classes[NV] = {
    MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER,
    MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_LEVEL,
    MPI_T_PVAR_CLASS_HIGHWATERMARK, MPI_T_PVAR_CLASS_LEVEL, MPI_T_PVAR_CLASS_COUNTER,
    MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER,
    MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER};

static MPI_T_pvar_session ses;
static MPI_T_pvar_handle hd[NV];

static void read_all(unsigned long long *v)
{
    int i;
    for (i = 0; i < NV; i++)
        T_OK(MPI_T_pvar_read(ses, hd[i], &v[i]));
}

static void pvars_and_events(void)
{
    unsigned long long a[NV], b[NV], v;
    int i, count, kind_rdv = 0, kind_unexp = 1;
    MPI_T_event_registration reg;
    MPI_T_pvar_session other;
    char *big = calloc((size_t)LARGE * LARGE_BYTES, 1);
    char small[8] = "1234567";
    MPI_Request rq[LARGE];
    int unexp_ev, rdv_ev;

    T_OK(MPI_T_event_get_index("madmpi_rendezvous_started", &rdv_ev));
    T_OK(MPI_T_event_get_index("madmpi_unexpected_message", &unexp_ev));
    T_OK(MPI_T_pvar_session_create(&ses));
    for (i = 0; i < NV; i++) {
        T_OK(MPI_T_pvar_handle_alloc(ses, pvar_index(names[i], classes[i]), NULL, &hd[i],
                                     &count));
        CHECK(count == 1);
    }
    /* Continuous and read-only variables refuse start, stop, reset and write. */
    T_ERR(MPI_T_pvar_start(ses, hd[QLEN]), MPI_T_ERR_PVAR_NO_STARTSTOP);
    T_ERR(MPI_T_pvar_reset(ses, hd[QHWM]), MPI_T_ERR_PVAR_NO_WRITE);
    T_ERR(MPI_T_pvar_write(ses, hd[QLEN], &v), MPI_T_ERR_PVAR_NO_WRITE);
    T_ERR(MPI_T_pvar_readreset(ses, hd[QBYTES], &v), MPI_T_ERR_PVAR_NO_WRITE);
    /* A counter not started stays at 0. */
    T_OK(MPI_T_pvar_read(ses, hd[EAGER], &v));
    CHECK(v == 0);
    /* Handles belong to their session. */
    T_OK(MPI_T_pvar_session_create(&other));
    T_ERR(MPI_T_pvar_read(other, hd[EAGER], &v), MPI_T_ERR_INVALID_HANDLE);
    T_ERR(MPI_T_pvar_read(ses, MPI_T_PVAR_ALL_HANDLES, &v), MPI_T_ERR_INVALID_HANDLE);
    T_OK(MPI_T_pvar_session_free(&other));
    T_ERR(MPI_T_pvar_read(other, hd[EAGER], &v), MPI_T_ERR_INVALID_SESSION);
    T_ERR(MPI_T_pvar_start((MPI_T_pvar_session)0x12345, hd[EAGER]), MPI_T_ERR_INVALID_SESSION);

    if (t_rank <= 1) {
        T_OK(MPI_T_event_handle_alloc(t_rank == 0 ? rdv_ev : unexp_ev, NULL, MPI_INFO_NULL, &reg));
        T_OK(MPI_T_event_register_callback(reg, MPI_T_CB_REQUIRE_MPI_RESTRICTED, MPI_INFO_NULL,
                                           t_rank == 0 ? &kind_rdv : &kind_unexp, on_event));
        T_ERR(MPI_T_event_register_callback(reg, 5, MPI_INFO_NULL, NULL, on_event),
              MPI_T_ERR_INVALID);
    }
    /* Outside a callback no instance handle is valid. */
    T_ERR(MPI_T_event_read((MPI_T_event_instance)&v, 0, &v), MPI_T_ERR_INVALID_HANDLE);

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* From here until the reads below, only the exchange's point-to-point traffic. */
    T_OK(MPI_T_pvar_start(ses, MPI_T_PVAR_ALL_HANDLES));
    read_all(a);
    /* Rank 0 sends once rank 1 has read its counters (rank 0 may leave the barrier first). */
    if (t_rank == 1)
        MPI_OK(MPI_Send(NULL, 0, MPI_CHAR, 0, 5, MPI_COMM_WORLD));
    if (t_rank == 0) {
        MPI_OK(MPI_Recv(NULL, 0, MPI_CHAR, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        read_all(a);
        for (i = 0; i < SMALL; i++)
            MPI_OK(MPI_Send(small, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD));
        for (i = 0; i < LARGE; i++)
            MPI_OK(MPI_Send(big, LARGE_BYTES, MPI_CHAR, 1, 2, MPI_COMM_WORLD));
        read_all(b);
        CHECKF(b[EAGER] - a[EAGER] == SMALL, "eager %llu", b[EAGER] - a[EAGER]);
        CHECKF(b[RDV] - a[RDV] == LARGE, "rdv %llu", b[RDV] - a[RDV]);
        CHECK(b[PACKETS] - a[PACKETS] >= LARGE + 1);
        CHECK(b[CHUNKS] - a[CHUNKS] >= b[PACKETS] - a[PACKETS]);
        CHECK((b[SHM_PK] - a[SHM_PK]) + (b[TCP_PK] - a[TCP_PK]) == b[PACKETS] - a[PACKETS]);
        if (b[TCP_PK] > a[TCP_PK]) /* over TCP the data is pushed */
            CHECK(b[TCP_SENT] - a[TCP_SENT] >= (unsigned long long)LARGE * LARGE_BYTES);
    } else if (t_rank == 1) {
        unsigned long long got;
        int flag = 0;
        for (i = 0; i < LARGE; i++)
            MPI_OK(MPI_Irecv(big + (size_t)i * LARGE_BYTES, LARGE_BYTES, MPI_CHAR, 0, 2,
                             MPI_COMM_WORLD, &rq[i]));
        MPI_OK(MPI_Waitall(LARGE, rq, MPI_STATUSES_IGNORE));
        /* The small messages came first and wait, unexpected. */
        read_all(b);
        CHECKF(b[UNEXP] - a[UNEXP] == SMALL, "unexpected %llu", b[UNEXP] - a[UNEXP]);
        CHECKF(b[QLEN] - a[QLEN] == SMALL, "queue %llu", b[QLEN] - a[QLEN]);
        CHECK(b[QBYTES] - a[QBYTES] == 8 * SMALL);
        CHECK(b[QHWM] >= b[QLEN]);
        got = (b[SHM_IN] - a[SHM_IN]) + (b[TCP_IN] - a[TCP_IN]) + (b[SHM_PULL] - a[SHM_PULL]);
        CHECK(got >= (unsigned long long)LARGE * LARGE_BYTES + 8 * SMALL);
        for (i = 0; i < SMALL; i++) {
            char r[8];
            MPI_OK(MPI_Recv(r, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(strcmp(r, small) == 0);
        }
        read_all(b);
        CHECK(b[QLEN] == a[QLEN] && b[QBYTES] == a[QBYTES]);
        for (i = 0; i < t_size; i++)
            if (i != 1)
                MPI_OK(MPI_Send(NULL, 0, MPI_CHAR, i, 6, MPI_COMM_WORLD));
        MPI_OK(MPI_Iprobe(0, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    }
    /* Nothing more goes to rank 1 (a barrier's message) before it has read its counters. */
    if (t_rank != 1)
        MPI_OK(MPI_Recv(NULL, 0, MPI_CHAR, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (t_rank <= 1) {
        /* The events were delivered by the MPI calls above (after them, outside the engine). */
        MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &i, MPI_STATUS_IGNORE));
        CHECK(bad_event == 0);
        if (t_rank == 0)
            CHECKF(n_rdv == LARGE, "rendezvous events %d", n_rdv);
        else
            CHECKF(n_unexp == SMALL, "unexpected events %d", n_unexp);
        T_OK(MPI_T_event_handle_free(reg, NULL, on_free));
        CHECK(n_freed == 1);
        T_ERR(MPI_T_event_handle_free(reg, NULL, on_free), MPI_T_ERR_INVALID_HANDLE);
    }

    /* Stop: the counter keeps its value while traffic goes on; reset, write, readreset. */
    T_OK(MPI_T_pvar_stop(ses, MPI_T_PVAR_ALL_HANDLES));
    T_OK(MPI_T_pvar_read(ses, hd[EAGER], &a[EAGER]));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0)
        MPI_OK(MPI_Send(small, 8, MPI_CHAR, 1, 3, MPI_COMM_WORLD));
    else if (t_rank == 1)
        MPI_OK(MPI_Recv(small, 8, MPI_CHAR, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    T_OK(MPI_T_pvar_read(ses, hd[EAGER], &v));
    CHECK(v == a[EAGER]);
    v = 1000;
    T_OK(MPI_T_pvar_write(ses, hd[EAGER], &v));
    T_OK(MPI_T_pvar_readreset(ses, hd[EAGER], &v));
    CHECK(v == 1000);
    T_OK(MPI_T_pvar_read(ses, hd[EAGER], &v));
    CHECK(v == 0);
    T_OK(MPI_T_pvar_start(ses, hd[EAGER]));
    if (t_rank == 0)
        MPI_OK(MPI_Send(small, 8, MPI_CHAR, 1, 3, MPI_COMM_WORLD));
    else if (t_rank == 1)
        MPI_OK(MPI_Recv(small, 8, MPI_CHAR, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    T_OK(MPI_T_pvar_read(ses, hd[EAGER], &v));
    CHECK(v == (t_rank == 0 ? 1u : 0u));
    T_OK(MPI_T_pvar_handle_free(ses, &hd[EAGER]));
    CHECK(hd[EAGER] == MPI_T_PVAR_HANDLE_NULL);
    T_OK(MPI_T_pvar_session_free(&ses));
    free(big);
}

int main(int argc, char **argv)
{
    int provided, n;

    T_ERR(MPI_T_cvar_get_num(&n), MPI_T_ERR_NOT_INITIALIZED);
    T_ERR(MPI_T_finalize(), MPI_T_ERR_NOT_INITIALIZED);
    T_OK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK(provided == MPI_THREAD_SINGLE);
    T_OK(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided)); /* reference counted */
    cvars_before_init();

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    CHECK(t_size >= 2);
    enumerate();
    cvars_running();
    pvars_and_events();
    T_OK(MPI_T_finalize());
    T_OK(MPI_T_cvar_get_num(&n)); /* one initialization left */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();

    /* After MPI_Finalize: still usable; the counters keep their last values. */
    {
        MPI_T_pvar_session s;
        MPI_T_pvar_handle h;
        unsigned long long v = 0;
        int count;
        T_OK(MPI_T_pvar_session_create(&s));
        T_OK(MPI_T_pvar_handle_alloc(s, pvar_index("madmpi_unexpected_queue_length_hwm",
                                                   MPI_T_PVAR_CLASS_HIGHWATERMARK),
                                     NULL, &h, &count));
        T_OK(MPI_T_pvar_read(s, h, &v));
        if (t_rank == 1)
            CHECK(v >= SMALL);
        T_OK(MPI_T_pvar_session_free(&s));
        CHECK(read_u64_cvar("MADMPI_SPIN") > 0);
    }
    T_OK(MPI_T_finalize());
    T_ERR(MPI_T_cvar_get_num(&n), MPI_T_ERR_NOT_INITIALIZED);
    if (t_rank == 0)
        printf("OK mpit\n");
    return 0;
}
