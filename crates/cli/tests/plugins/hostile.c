/*
 * The seqpacket example stack (examples/c-stack/seqpacket.c) broken in one way, chosen at
 * build time with -DHOSTILE_<WAY>: each is a plugin a user might really ship, and each
 * must fail its cells with a clear reason, never the run (tests/plugins.rs).
 */
/* Each build uses one of the ways below. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#define ipcm_stack_v1 seqpacket_stack_v1
#include "seqpacket.c"
#undef ipcm_stack_v1

#include <signal.h>
#include <unistd.h>

static ipcm_stack_table_v1 hostile;
/* Set in the process that listened: the measuring side, not the peer. */
static int measuring;

static ipcm_status listen_and_mark(size_t max_message, ipcm_acceptor **a, ipcm_error *e) {
    measuring = 1;
    return sp_listen(max_message, a, e);
}

/* Says a message was one byte longer than the room it had. */
static ipcm_status recv_lying(ipcm_channel *c, uint8_t *buf, size_t capacity, size_t *len,
                              uint64_t deadline_ns, ipcm_error *error) {
    ipcm_status s = sp_recv(c, buf, capacity, len, deadline_ns, error);
    if (s == IPCM_OK && measuring && *len > 0) *len = capacity + 1;
    return s;
}

/* Returns a status the ABI does not have. */
static ipcm_status send_unknown_status(ipcm_channel *c, const uint8_t *m, size_t len,
                                       uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && c->sent >= 3) return (ipcm_status)42;
    return sp_send(c, m, len, deadline_ns, error);
}

/* The peer dies of a bad pointer on its third reply. */
static ipcm_status send_crashing(ipcm_channel *c, const uint8_t *m, size_t len,
                                 uint64_t deadline_ns, ipcm_error *error) {
    if (!measuring && c->sent >= 2) raise(SIGSEGV);
    return sp_send(c, m, len, deadline_ns, error);
}

/* The peer stops answering and ignores its deadline. */
static ipcm_status recv_never(ipcm_channel *c, uint8_t *buf, size_t capacity, size_t *len,
                              uint64_t deadline_ns, ipcm_error *error) {
    if (!measuring && c->sent >= 3) for (;;) pause();
    return sp_recv(c, buf, capacity, len, deadline_ns, error);
}

/* A borrow that lends more than was asked for. */
static ipcm_status borrow_lying(ipcm_channel *c, size_t limit, uint64_t deadline_ns,
                                const uint8_t **message, size_t *len, ipcm_error *error) {
    ipcm_status s = sp_borrow(c, limit, deadline_ns, message, len, error);
    if (s == IPCM_OK && measuring && *len > 0) *len = limit + 1;
    return s;
}

/* The measuring side dies of a bad pointer, or stops for good, on its third reply. */
static ipcm_status recv_crashing_here(ipcm_channel *c, uint8_t *buf, size_t capacity,
                                      size_t *len, uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && c->sent >= 3) raise(SIGSEGV);
    return sp_recv(c, buf, capacity, len, deadline_ns, error);
}

/* The measuring side ends its own process with _exit(0), past every exit handler, on
 * its third reply. */
static ipcm_status recv_exiting_here(ipcm_channel *c, uint8_t *buf, size_t capacity,
                                     size_t *len, uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && c->sent >= 3) _exit(0);
    return sp_recv(c, buf, capacity, len, deadline_ns, error);
}

/* The same with exit(0), which runs exit handlers. */
static ipcm_status recv_exit_here(ipcm_channel *c, uint8_t *buf, size_t capacity, size_t *len,
                                  uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && c->sent >= 3) exit(0);
    return sp_recv(c, buf, capacity, len, deadline_ns, error);
}

static ipcm_status recv_stuck_here(ipcm_channel *c, uint8_t *buf, size_t capacity,
                                   size_t *len, uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && c->sent >= 3) for (;;) pause();
    return sp_recv(c, buf, capacity, len, deadline_ns, error);
}

/* The measuring side answers itself: each request kept by send, given back by recv; only
 * the goodbye reaches the peer. Every byte would match. */
static uint8_t kept[MAX_LOAN];
static size_t kept_len;

static ipcm_status send_to_self(ipcm_channel *c, const uint8_t *m, size_t len,
                                uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && len > 0 && len <= MAX_LOAN) {
        memcpy(kept, m, len);
        kept_len = len;
        return IPCM_OK;
    }
    return sp_send(c, m, len, deadline_ns, error);
}

static ipcm_status recv_from_self(ipcm_channel *c, uint8_t *buf, size_t capacity, size_t *len,
                                  uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && kept_len > 0 && kept_len <= capacity) {
        memcpy(buf, kept, kept_len);
        *len = kept_len;
        kept_len = 0;
        return IPCM_OK;
    }
    return sp_recv(c, buf, capacity, len, deadline_ns, error);
}

/* Writes only the first 8 bytes of each reply after the first, and says it wrote them all. */
static ipcm_status recv_short(ipcm_channel *c, uint8_t *buf, size_t capacity, size_t *len,
                              uint64_t deadline_ns, ipcm_error *error) {
    static uint8_t whole[MAX_LOAN];
    static int seen;
    ipcm_status s = sp_recv(c, whole, capacity < MAX_LOAN ? capacity : MAX_LOAN, len,
                            deadline_ns, error);
    if (s != IPCM_OK) return s;
    memcpy(buf, whole, measuring && seen++ && *len > 8 ? 8 : *len);
    return s;
}

#ifdef HOSTILE_CRASHING_LOAD
/* Loading the library kills the process that loads it. */
__attribute__((constructor)) static void crash_on_load(void) { abort(); }
#endif

#if defined(HOSTILE_EXIT0_ON_LOAD) || defined(HOSTILE_EXIT2_ON_LOAD)
/* Loading the library ends the process that loads it, with a status of its choosing. */
__attribute__((constructor)) static void exit_on_load(void) {
#ifdef HOSTILE_EXIT0_ON_LOAD
    exit(0);
#else
    exit(2);
#endif
}
#endif

#ifdef HOSTILE_EXIT0_ON_SECOND_LOAD
/* Loads as it should the first time (the probe's), in the folder it is run from, and
 * ends every later process that loads it with exit(0). */
__attribute__((constructor)) static void exit_on_second_load(void) {
    if (access("loaded-once", F_OK) == 0) exit(0);
    FILE *mark = fopen("loaded-once", "w");
    if (mark) fclose(mark);
}
#endif

/* Returns -1, a status the ABI does not have (the header's enum is a C int). */
static ipcm_status send_negative_status(ipcm_channel *c, const uint8_t *m, size_t len,
                                        uint64_t deadline_ns, ipcm_error *error) {
    if (measuring && c->sent >= 3) return (ipcm_status)-1;
    return sp_send(c, m, len, deadline_ns, error);
}

#ifndef HOSTILE_NO_ENTRY
const ipcm_stack_table_v1 *ipcm_stack_v1(void) {
    hostile = *seqpacket_stack_v1();
    hostile.listen = listen_and_mark;
#if defined(HOSTILE_ABI_VERSION)
    hostile.abi_version = 2;
#elif defined(HOSTILE_SIZE)
    hostile.size = 64;
#elif defined(HOSTILE_NAME)
    hostile.name = "someone-else";
#elif defined(HOSTILE_PARTIAL_LOANS)
    hostile.borrow = NULL;
#elif defined(HOSTILE_NULL_SEND)
    hostile.send = NULL;
#elif defined(HOSTILE_LYING_RECV)
    hostile.recv = recv_lying;
#elif defined(HOSTILE_UNKNOWN_STATUS)
    hostile.send = send_unknown_status;
#elif defined(HOSTILE_NEGATIVE_STATUS)
    hostile.send = send_negative_status;
#elif defined(HOSTILE_CRASHING_PEER)
    hostile.send = send_crashing;
#elif defined(HOSTILE_SILENT_PEER)
    hostile.recv = recv_never;
#elif defined(HOSTILE_CRASHING_MEASURER)
    hostile.recv = recv_crashing_here;
#elif defined(HOSTILE_EXITING_MEASURER)
    hostile.recv = recv_exiting_here;
#elif defined(HOSTILE_EXIT_CALLING_MEASURER)
    hostile.recv = recv_exit_here;
#elif defined(HOSTILE_STUCK_MEASURER)
    hostile.recv = recv_stuck_here;
#elif defined(HOSTILE_ANSWERS_ITSELF)
    hostile.send = send_to_self;
    hostile.recv = recv_from_self;
#elif defined(HOSTILE_SHORT_RECV)
    hostile.recv = recv_short;
#elif defined(HOSTILE_LYING_BORROW)
    hostile.borrow = borrow_lying;
#endif
    return &hostile;
}
#endif
