/*
 * ipc_matrix_stack.h: a stack of your own, in C (or any language with a C ABI), as an
 * ipc-matrix transport, both sides. Version 1 of the ABI.
 *
 * Build a shared library that exports one function, ipcm_stack_v1(), returning a table of
 * your stack's calls; name it in matrix.yaml:
 *
 *     plugins:
 *       seqpacket:                              # the stack's name in cell ids
 *         library: build/{arch}/libseqpacket.so # relative to matrix.yaml; {arch} is the
 *                                               # CPU the matrix runs on (x86_64, aarch64, s390x)
 *     scenarios:
 *       - { name: echo, kind: echo, transports: [seqpacket], payload_sizes: [200B] }
 *
 * Both processes of a cell load it: the measuring side calls listen, address and accept;
 * the peer (a separate process) calls connect. Each then sends and receives whole
 * messages through the channel it got. ipc-matrix checks every byte of every reply.
 *
 * The rules:
 * - Every call that may wait takes a deadline: an absolute time on CLOCK_MONOTONIC, in
 *   nanoseconds. Return IPCM_TIMEOUT once it has passed; never block past it (a stack
 *   that cannot wait with a deadline polls).
 * - Messages are whole: a send is received as one message of the same length.
 * - recv writes at most `capacity` bytes; a message longer than that is IPCM_TOO_LONG,
 *   refused before it is read (set *len to its length when known). A length larger than
 *   the capacity, a borrow longer than its limit, a status not listed below, is treated
 *   as a lie and fails the cell. The room recv gets is written over before each call, so
 *   a length longer than what was written shows as wrong bytes.
 * - Every message the measuring side sends must reach the peer: a peer whose goodbye
 *   comes after another number of messages than were sent fails the cell (a stack that
 *   answered the measuring side itself would match every byte).
 * - On any status but IPCM_OK, write a sentence into error->message (NUL-terminated, at
 *   most IPCM_ERROR_BYTES bytes with the NUL); it ends up in the cell's failure.
 * - The calls of one channel or acceptor come from one thread at a time; different
 *   channels may be used from different threads at once. The table and the strings it
 *   points to live as long as the library is loaded, which is for the life of the
 *   process. Every ipc-matrix command that reads matrix.yaml loads the library (its
 *   initialisers run) first in a process of its own, which reads its table; the library
 *   is then loaded again only in the processes that run its cells, peers and checks.
 * - stdout and stderr are shared with ipc-matrix's own output: write nothing there in
 *   normal operation.
 * - In `ipc-matrix run`, each cell's measuring side runs in a process of its own: a
 *   crash there fails the cell, and a call that does not come back is stopped once the
 *   cell has made no progress for twice its round-trip `timeout` and 10 s (30 s of
 *   set-up and up to 63 s for its peer's start more before the first round trip and
 *   after the last).
 * - The loaned path (loan/commit/cancel, borrow/release) is optional: leave all five NULL
 *   (and max_loan 0) for a stack that only copies. With it, ipc-matrix writes a request
 *   straight into your loan and compares a reply where it lies, as a zero-copy stack's
 *   users do. One loan and one borrowed message at a time per channel; both may be open
 *   at once, and may be the same memory (an echo in place: the peer then copies
 *   nothing). After commit, whatever it returns, the loan is closed. A loan of 0 bytes
 *   (the goodbye) may give any *room, NULL included; a borrowed message of 0 bytes may
 *   be at NULL. ipc-matrix makes no copying send while a loan is open, and no copying
 *   recv while a message is borrowed (it refuses them itself).
 * - The peer learns nothing but the address: anything its side needs (the longest
 *   message, a segment's size) travels in the address string.
 */
#ifndef IPC_MATRIX_STACK_H
#define IPC_MATRIX_STACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IPCM_STACK_ABI_VERSION 1u
#define IPCM_ERROR_BYTES 256u

typedef enum ipcm_status {
    IPCM_OK = 0,
    /* Nothing happened before the deadline. */
    IPCM_TIMEOUT = 1,
    /* The other side closed its end. */
    IPCM_CLOSED = 2,
    /* A message longer than the receive's capacity, or than a loan holds. */
    IPCM_TOO_LONG = 3,
    /* Anything else: say what in error->message. */
    IPCM_ERROR = 4
} ipcm_status;

/* Statuses cross the ABI as 4-byte integers: a build with -fshort-enums would break it. */
#ifdef __cplusplus
static_assert(sizeof(ipcm_status) == 4, "ipcm_status must be 4 bytes (no -fshort-enums)");
#else
_Static_assert(sizeof(ipcm_status) == 4, "ipcm_status must be 4 bytes (no -fshort-enums)");
#endif

/* The built-in channel whose floor (the machine's cheapest exchange of the same kind)
 * your stack's cells are measured against. */
typedef enum ipcm_floor {
    IPCM_FLOOR_LOCAL = 0, /* a Unix socket */
    IPCM_FLOOR_TCP = 1,
    IPCM_FLOOR_UDP = 2,
    IPCM_FLOOR_PIPE = 3,
    IPCM_FLOOR_SHM = 4    /* shared memory, blocking on a futex */
} ipcm_floor;

typedef struct ipcm_error {
    char message[IPCM_ERROR_BYTES];
} ipcm_error;

/* Your types: ipc-matrix only holds pointers to them. */
typedef struct ipcm_acceptor ipcm_acceptor;
typedef struct ipcm_channel ipcm_channel;

typedef struct ipcm_stack_table_v1 {
    /* IPCM_STACK_ABI_VERSION, and sizeof(ipcm_stack_table_v1): a table of another version
     * or size is refused with both numbers named. */
    uint32_t abi_version;
    uint32_t size;
    /* The stack's name: a-z, 0-9 and '-', starting with a letter, at most 40 bytes; the
     * same as its key in matrix.yaml's plugins. */
    const char *name;
    /* An ipcm_floor. */
    uint32_t floor;
    /* 0: later versions may use it. */
    uint32_t reserved;

    /* The measuring side: opens an acceptor for messages of up to max_message bytes. */
    ipcm_status (*listen)(size_t max_message, ipcm_acceptor **acceptor, ipcm_error *error);
    /* What the peer needs to connect (a path, a port, a name): a NUL-terminated UTF-8
     * string the acceptor owns, at most 4095 bytes before its NUL. */
    const char *(*address)(const ipcm_acceptor *acceptor);
    /* Waits for the peer, process peer_pid, to connect. Takes the acceptor, whatever it
     * returns (free it). */
    ipcm_status (*accept)(ipcm_acceptor *acceptor, uint32_t peer_pid, uint64_t deadline_ns,
                          ipcm_channel **channel, ipcm_error *error);
    /* Frees an acceptor that was never accepted on. */
    void (*drop_acceptor)(ipcm_acceptor *acceptor);

    /* The peer's side: connects to what address gave. */
    ipcm_status (*connect)(const char *address, uint64_t deadline_ns, ipcm_channel **channel,
                           ipcm_error *error);

    /* Sends one whole message of len bytes (len 0 is the goodbye, which is sent too). */
    ipcm_status (*send)(ipcm_channel *channel, const uint8_t *message, size_t len,
                        uint64_t deadline_ns, ipcm_error *error);
    /* Receives one whole message into buf, of capacity bytes; its length into *len. */
    ipcm_status (*recv)(ipcm_channel *channel, uint8_t *buf, size_t capacity, size_t *len,
                        uint64_t deadline_ns, ipcm_error *error);
    /* Closes the channel and frees it. */
    void (*close)(ipcm_channel *channel);

    /* The loaned path, optional: all five set, or all NULL. max_loan is the longest
     * message a loan or a borrow holds. */
    size_t max_loan;
    /* Lends room for a message of len bytes in the stack's memory: *room points to len
     * writable bytes until commit or cancel. */
    ipcm_status (*loan)(ipcm_channel *channel, size_t len, uint64_t deadline_ns,
                        uint8_t **room, ipcm_error *error);
    /* Sends the open loan as filled. */
    ipcm_status (*commit)(ipcm_channel *channel, uint64_t deadline_ns, ipcm_error *error);
    /* Gives the open loan back unsent. */
    void (*cancel)(ipcm_channel *channel);
    /* Lends the next message where it lies (*message, *len: at most limit bytes) until
     * release. */
    ipcm_status (*borrow)(ipcm_channel *channel, size_t limit, uint64_t deadline_ns,
                          const uint8_t **message, size_t *len, ipcm_error *error);
    /* Gives the borrowed message back. */
    void (*release)(ipcm_channel *channel);
} ipcm_stack_table_v1;

/* The one symbol ipc-matrix looks up. */
const ipcm_stack_table_v1 *ipcm_stack_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* IPC_MATRIX_STACK_H */
