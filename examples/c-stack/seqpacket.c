/*
 * seqpacket: a small IPC stack of its own, in C, for ipc-matrix's C ABI
 * (crates/transport/include/ipc_matrix_stack.h): whole messages over a Unix
 * SOCK_SEQPACKET socket in a private folder, each wait bounded by its deadline with
 * poll(2). It offers the loaned path too: a loan is room in the channel's own buffer,
 * sent as it lies; a borrowed message is read where it was received.
 *
 * Its fault: with SEQPACKET_CORRUPT_REPLY=N in the peer's environment, the peer flips
 * the middle byte of the Nth message it sends (counting from 1), as a buggy stack would.
 */
#define _GNU_SOURCE
#include "ipc_matrix_stack.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct ipcm_acceptor {
    int listener;
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

struct ipcm_channel {
    int fd;
    unsigned long sent;      /* messages sent, for the fault */
    unsigned long corrupt;   /* the message to spoil, 0 for none */
    uint8_t *out;            /* the loan's room, max_message bytes */
    size_t loan_len;
    int loan_open;
    uint8_t *in;             /* where a borrowed message lies */
    int borrow_open;
};

/* The longest message the loaned path holds, and the receive buffer of a peer. */
#define MAX_LOAN (64u * 1024u)

static ipcm_status fail(ipcm_error *error, ipcm_status status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error->message, sizeof error->message, format, args);
    va_end(args);
    return status;
}

/* Milliseconds from now until deadline_ns (CLOCK_MONOTONIC), rounded up; 0 once past. */
static int millis_left(uint64_t deadline_ns) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    if (deadline_ns <= now_ns) return 0;
    uint64_t ms = (deadline_ns - now_ns + 999999u) / 1000000u;
    return ms > 60000u ? 60000 : (int)ms;
}

/* Waits for fd to be ready for events by deadline_ns. */
static ipcm_status wait_for(int fd, short events, uint64_t deadline_ns, ipcm_error *error) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int ms = millis_left(deadline_ns);
        int n = poll(&p, 1, ms);
        if (n > 0) {
            if (p.revents & (POLLHUP | POLLERR) && !(p.revents & events))
                return fail(error, IPCM_CLOSED, "the other side closed its end");
            return IPCM_OK;
        }
        if (n == 0 && ms == 0) return fail(error, IPCM_TIMEOUT, "deadline passed");
        if (n < 0 && errno != EINTR) return fail(error, IPCM_ERROR, "poll: %s", strerror(errno));
    }
}

/* A channel on fd; the peer's (is_peer) takes its fault from the environment. */
static ipcm_status new_channel(int fd, int is_peer, ipcm_channel **out, ipcm_error *error) {
    ipcm_channel *c = calloc(1, sizeof *c);
    if (c) {
        c->out = malloc(MAX_LOAN);
        c->in = malloc(MAX_LOAN);
    }
    if (!c || !c->out || !c->in) {
        if (c) { free(c->out); free(c->in); free(c); }
        close(fd);
        return fail(error, IPCM_ERROR, "out of memory");
    }
    c->fd = fd;
    const char *corrupt = is_peer ? getenv("SEQPACKET_CORRUPT_REPLY") : NULL;
    c->corrupt = corrupt ? strtoul(corrupt, NULL, 10) : 0;
    *out = c;
    return IPCM_OK;
}

static ipcm_status sp_listen(size_t max_message, ipcm_acceptor **out, ipcm_error *error) {
    (void)max_message;
    ipcm_acceptor *a = calloc(1, sizeof *a);
    if (!a) return fail(error, IPCM_ERROR, "out of memory");
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    /* A private folder (mode 0700): nobody else can connect, and the path is short. */
    /* The folder's path leaves room for "/s" in a socket path. */
    if (snprintf(a->dir, sizeof a->dir - 2, "%s/seqpacket.XXXXXX", tmp) >= (int)sizeof a->dir - 2 ||
        !mkdtemp(a->dir)) {
        free(a);
        return fail(error, IPCM_ERROR, "cannot make a private folder in %s: %s", tmp, strerror(errno));
    }
    size_t dir_len = strlen(a->dir);
    memcpy(a->path, a->dir, dir_len);
    memcpy(a->path + dir_len, "/s", 3);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, a->path, dir_len + 3);
    a->listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (a->listener < 0 || bind(a->listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(a->listener, 1) != 0) {
        int e = errno;
        if (a->listener >= 0) close(a->listener);
        unlink(a->path);
        rmdir(a->dir);
        free(a);
        return fail(error, IPCM_ERROR, "cannot listen on a seqpacket socket: %s", strerror(e));
    }
    *out = a;
    return IPCM_OK;
}

static const char *sp_address(const ipcm_acceptor *a) { return a->path; }

static void sp_drop_acceptor(ipcm_acceptor *a) {
    close(a->listener);
    unlink(a->path);
    rmdir(a->dir);
    free(a);
}

static ipcm_status sp_accept(ipcm_acceptor *a, uint32_t peer_pid, uint64_t deadline_ns,
                             ipcm_channel **out, ipcm_error *error) {
    (void)peer_pid;
    ipcm_status s = wait_for(a->listener, POLLIN, deadline_ns, error);
    int fd = -1;
    if (s == IPCM_OK) {
        fd = accept4(a->listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) s = fail(error, IPCM_ERROR, "accept: %s", strerror(errno));
    }
    /* Connected (or given up): the socket file and its folder go at once. */
    sp_drop_acceptor(a);
    if (s != IPCM_OK) return s;
    return new_channel(fd, 0, out, error);
}

static ipcm_status sp_connect(const char *address, uint64_t deadline_ns, ipcm_channel **out,
                              ipcm_error *error) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(address) >= sizeof addr.sun_path)
        return fail(error, IPCM_ERROR, "the address is longer than a socket path");
    strcpy(addr.sun_path, address);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return fail(error, IPCM_ERROR, "socket: %s", strerror(errno));
    for (;;) {
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) break;
        if (errno == EINPROGRESS || errno == EAGAIN) {
            ipcm_status s = wait_for(fd, POLLOUT, deadline_ns, error);
            if (s != IPCM_OK) { close(fd); return s; }
            break;
        }
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return fail(error, IPCM_ERROR, "connect to %s: %s", address, strerror(e));
        }
    }
    return new_channel(fd, 1, out, error);
}

/* Each packet is a one-byte mark, then the message: an empty message (the goodbye) is
 * a packet of the mark alone, told apart from the end of the connection, which reads as
 * no bytes at all. Both parts go in one sendmsg/recvmsg, with no copy. */
static uint8_t MARK = 0x4d;

static ipcm_status sp_send(ipcm_channel *c, const uint8_t *message, size_t len,
                           uint64_t deadline_ns, ipcm_error *error) {
    c->sent++;
    const uint8_t *bytes = message;
    if (c->corrupt && c->sent == c->corrupt && len > 0 && len <= MAX_LOAN) {
        /* The fault: the middle byte of this message, flipped, as a buggy stack would. */
        if (message != c->out) memcpy(c->out, message, len);
        c->out[len / 2] ^= 0xff;
        bytes = c->out;
    }
    struct iovec parts[2] = {{.iov_base = &MARK, .iov_len = 1},
                             {.iov_base = (void *)bytes, .iov_len = len}};
    struct msghdr msg = {.msg_iov = parts, .msg_iovlen = 2};
    for (;;) {
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n == (ssize_t)len + 1) return IPCM_OK;
        if (n >= 0) return fail(error, IPCM_ERROR, "sent %zd of %zu bytes", n, len + 1);
        if (errno == EPIPE || errno == ECONNRESET) return fail(error, IPCM_CLOSED, "closed");
        if (errno == EMSGSIZE) return fail(error, IPCM_TOO_LONG, "%zu bytes is more than a packet", len);
        if (errno != EAGAIN && errno != EINTR) return fail(error, IPCM_ERROR, "send: %s", strerror(errno));
        ipcm_status s = wait_for(c->fd, POLLOUT, deadline_ns, error);
        if (s != IPCM_OK) return s;
    }
}

static ipcm_status sp_recv(ipcm_channel *c, uint8_t *buf, size_t capacity, size_t *len,
                           uint64_t deadline_ns, ipcm_error *error) {
    for (;;) {
        /* Waits first, then reads: the same calls whether the packet is there yet or not,
         * so that what a receive costs (and counts) does not depend on timing. */
        ipcm_status s = wait_for(c->fd, POLLIN, deadline_ns, error);
        if (s != IPCM_OK) return s;
        /* MSG_PEEK|MSG_TRUNC tells the next packet's length without taking it, so that
         * one longer than the room is refused before it is read. */
        uint8_t probe;
        ssize_t n = recv(c->fd, &probe, 1, MSG_PEEK | MSG_TRUNC);
        if (n == 0) return fail(error, IPCM_CLOSED, "the other side closed its end");
        if (n > 0) {
            if (probe != MARK) return fail(error, IPCM_ERROR, "a packet without its mark");
            if ((size_t)n - 1 > capacity) {
                *len = (size_t)n - 1;
                return fail(error, IPCM_TOO_LONG, "a %zd-byte message, for room of %zu", n - 1,
                            capacity);
            }
            uint8_t mark;
            struct iovec parts[2] = {{.iov_base = &mark, .iov_len = 1},
                                     {.iov_base = buf, .iov_len = capacity}};
            struct msghdr msg = {.msg_iov = parts, .msg_iovlen = 2};
            ssize_t got = recvmsg(c->fd, &msg, 0);
            if (got <= 0) return fail(error, IPCM_ERROR, "recv: %s", strerror(errno));
            *len = (size_t)got - 1;
            return IPCM_OK;
        }
        if (errno == ECONNRESET) return fail(error, IPCM_CLOSED, "closed");
        if (errno != EAGAIN && errno != EINTR) return fail(error, IPCM_ERROR, "recv: %s", strerror(errno));
    }
}

static void sp_close(ipcm_channel *c) {
    close(c->fd);
    free(c->out);
    free(c->in);
    free(c);
}

static ipcm_status sp_loan(ipcm_channel *c, size_t len, uint64_t deadline_ns, uint8_t **room,
                           ipcm_error *error) {
    (void)deadline_ns;
    if (c->loan_open) return fail(error, IPCM_ERROR, "a loan is open already");
    if (len > MAX_LOAN) return fail(error, IPCM_TOO_LONG, "%zu bytes is more than a loan", len);
    c->loan_open = 1;
    c->loan_len = len;
    *room = c->out;
    return IPCM_OK;
}

static ipcm_status sp_commit(ipcm_channel *c, uint64_t deadline_ns, ipcm_error *error) {
    if (!c->loan_open) return fail(error, IPCM_ERROR, "no loan is open");
    c->loan_open = 0;
    return sp_send(c, c->out, c->loan_len, deadline_ns, error);
}

static void sp_cancel(ipcm_channel *c) { c->loan_open = 0; }

static ipcm_status sp_borrow(ipcm_channel *c, size_t limit, uint64_t deadline_ns,
                             const uint8_t **message, size_t *len, ipcm_error *error) {
    if (c->borrow_open) return fail(error, IPCM_ERROR, "a message is borrowed already");
    ipcm_status s = sp_recv(c, c->in, limit < MAX_LOAN ? limit : MAX_LOAN, len, deadline_ns, error);
    if (s != IPCM_OK) return s;
    c->borrow_open = 1;
    *message = c->in;
    return IPCM_OK;
}

static void sp_release(ipcm_channel *c) { c->borrow_open = 0; }

static const ipcm_stack_table_v1 TABLE = {
    .abi_version = IPCM_STACK_ABI_VERSION,
    .size = sizeof(ipcm_stack_table_v1),
    .name = "seqpacket",
    .floor = IPCM_FLOOR_LOCAL,
    .listen = sp_listen,
    .address = sp_address,
    .accept = sp_accept,
    .drop_acceptor = sp_drop_acceptor,
    .connect = sp_connect,
    .send = sp_send,
    .recv = sp_recv,
    .close = sp_close,
    .max_loan = MAX_LOAN,
    .loan = sp_loan,
    .commit = sp_commit,
    .cancel = sp_cancel,
    .borrow = sp_borrow,
    .release = sp_release,
};

const ipcm_stack_table_v1 *ipcm_stack_v1(void) { return &TABLE; }
