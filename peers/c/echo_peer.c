/* c-echo-peer: the reference external peer of ipc-matrix, peer protocol v1.
 *
 *   c-echo-peer [--corrupt N:OFFSET] serve --config '<json>'
 *
 * Connects to the measuring side (tcp, local or udp), echoes every message byte for byte
 * until the goodbye (an empty message), then exits 0. Any error: one line on stderr,
 * "c-echo-peer: <what>", exit 2. --corrupt flips (xor 0xFF) byte OFFSET of the reply to
 * message N (0-based, every message counted): the fault test that proves a wrong reply
 * byte is caught. Messages are numbered the same way in error lines.
 *
 * C11 with POSIX and Linux only; no byte order is assumed (the length prefix is decoded
 * and encoded byte by byte), so it is the same on s390x as on x86_64.
 * Build: scripts/build-peers.sh [TRIPLE]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define NAME "c-echo-peer"
#define UDP_MAX 65507u
#define MAX_MESSAGE_LIMIT (UINT64_C(1) << 40) /* the schema's maximum */
#define CHUNK ((size_t)1 << 30)                /* read/write at most this much per call */

static const char HELLO[] = "ipc-matrix udp hello v1";

static uint64_t max_message, idle_ms, parent_pid;
static int corrupt_on;
static uint64_t corrupt_index, corrupt_offset;

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* The protocol wants ONE line: config text may hold control characters. */
  for (char *p = line; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  fprintf(stderr, NAME ": %s\n", line);
  exit(2);
}

static void usage(void) __attribute__((noreturn));
static void usage(void) { fail("usage: " NAME " [--corrupt N:OFFSET] serve --config <json>"); }

/* Strict decimal: digits only, no sign, no overflow. Returns the end, or NULL. */
static const char *parse_u64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (*s < '0' || *s > '9') return NULL;
  for (; *s >= '0' && *s <= '9'; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return NULL;
    v = v * 10 + d;
  }
  *out = v;
  return s;
}

/* ---- The config: a small strict JSON parser for one flat object ---------------------- */

enum vtype { V_NONE, V_STR, V_UINT, V_OTHER };
struct field { const char *key; enum vtype type; char *str; uint64_t num; };
enum { F_PROTOCOL, F_CELL, F_KIND, F_TRANSPORT, F_ADDRESS, F_MAX_MESSAGE, F_IDLE, F_PARENT, NFIELDS };
static struct field fields[NFIELDS] = {
  {.key = "protocol"}, {.key = "cell"}, {.key = "kind"}, {.key = "transport"},
  {.key = "address"}, {.key = "max_message"}, {.key = "idle_timeout_ms"}, {.key = "parent_pid"},
};

static const char *jp, *jstart;

static void jfail(const char *what) __attribute__((noreturn));
static void jfail(const char *what) { fail("--config: %s at byte %td", what, jp - jstart); }

static void ws(void) { while (*jp == ' ' || *jp == '\t' || *jp == '\n' || *jp == '\r') jp++; }

static void expect(char c) {
  ws();
  if (*jp != c) jfail(c == ':' ? "expected ':'" : c == ',' ? "expected ',' or the end" : "expected '{'");
  jp++;
}

static unsigned hex4(void) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++, jp++) {
    char c = *jp;
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else jfail("bad \\u escape");
  }
  return v;
}

static char *utf8(char *o, unsigned cp) {
  if (cp < 0x80) { *o++ = (char)cp; }
  else if (cp < 0x800) { *o++ = (char)(0xC0 | cp >> 6); *o++ = (char)(0x80 | (cp & 0x3F)); }
  else if (cp < 0x10000) {
    *o++ = (char)(0xE0 | cp >> 12); *o++ = (char)(0x80 | (cp >> 6 & 0x3F)); *o++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *o++ = (char)(0xF0 | cp >> 18); *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
    *o++ = (char)(0x80 | (cp >> 6 & 0x3F)); *o++ = (char)(0x80 | (cp & 0x3F));
  }
  return o;
}

/* A string, unescaped into a new buffer (never longer than its JSON text). */
static char *jstring(void) {
  ws();
  if (*jp != '"') jfail("expected a string");
  jp++;
  char *out = malloc(strlen(jp) + 1), *o = out;
  if (!out) fail("out of memory");
  for (;;) {
    unsigned char c = (unsigned char)*jp++;
    if (c == '"') break;
    if (c < 0x20) { jp--; jfail(c ? "control character in a string" : "unterminated string"); }
    if (c != '\\') { *o++ = (char)c; continue; }
    switch (*jp++) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '/': *o++ = '/'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      unsigned cp = hex4();
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (jp[0] != '\\' || jp[1] != 'u') jfail("lone surrogate");
        jp += 2;
        unsigned lo = hex4();
        if (lo < 0xDC00 || lo > 0xDFFF) jfail("lone surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        jfail("lone surrogate");
      }
      if (cp == 0) jfail("\\u0000 in a string"); /* C strings cannot hold it */
      o = utf8(o, cp);
      break;
    }
    default: jp--; jfail("bad escape");
    }
  }
  *o = 0;
  return out;
}

/* Any JSON number; *is_uint when it is a plain non-negative integer that fits 64 bits
 * (1.0 and 1e3 are not: the schema's integers are written as such). */
static uint64_t jnumber(int *is_uint) {
  int plain = 1, overflow = 0;
  uint64_t v = 0;
  if (*jp == '-') { plain = 0; jp++; }
  if (*jp == '0') jp++;
  else if (*jp >= '1' && *jp <= '9')
    for (; *jp >= '0' && *jp <= '9'; jp++) {
      unsigned d = (unsigned)(*jp - '0');
      if (v > (UINT64_MAX - d) / 10) overflow = 1;
      else v = v * 10 + d;
    }
  else jfail("bad number");
  if (*jp == '.') {
    plain = 0; jp++;
    if (*jp < '0' || *jp > '9') jfail("bad number");
    while (*jp >= '0' && *jp <= '9') jp++;
  }
  if (*jp == 'e' || *jp == 'E') {
    plain = 0; jp++;
    if (*jp == '+' || *jp == '-') jp++;
    if (*jp < '0' || *jp > '9') jfail("bad number");
    while (*jp >= '0' && *jp <= '9') jp++;
  }
  *is_uint = plain && !overflow;
  return v;
}

/* One value into f (a known key), or skipped when f is NULL (an unknown key, or nested). */
static void jvalue(struct field *f, int depth) {
  ws();
  if (depth > 32) jfail("nested too deep");
  if (f) f->type = V_OTHER;
  char c = *jp;
  if (c == '"') {
    char *s = jstring();
    if (f) { f->type = V_STR; f->str = s; } else free(s);
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    int u;
    uint64_t v = jnumber(&u);
    if (f && u) { f->type = V_UINT; f->num = v; }
  } else if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    jp++; ws();
    if (*jp == close) { jp++; return; }
    for (;;) {
      if (c == '{') { free(jstring()); expect(':'); }
      jvalue(NULL, depth + 1);
      ws();
      if (*jp == close) { jp++; return; }
      expect(',');
    }
  } else if (!strncmp(jp, "true", 4) || !strncmp(jp, "null", 4)) jp += 4;
  else if (!strncmp(jp, "false", 5)) jp += 5;
  else jfail("expected a value");
}

static void parse_config(const char *text) {
  jp = jstart = text;
  expect('{');
  ws();
  if (*jp != '}')
    for (;;) {
      char *key = jstring();
      struct field *f = NULL;
      for (int i = 0; i < NFIELDS; i++)
        if (!strcmp(key, fields[i].key)) f = &fields[i];
      if (f && f->type != V_NONE) fail("--config: duplicate key \"%s\"", key);
      free(key);
      /* Unknown keys are skipped: the schema forbids them (additionalProperties: false),
       * but a later minor addition should not break this peer. */
      expect(':');
      jvalue(f, 0);
      ws();
      if (*jp == '}') break;
      expect(',');
    }
  jp++;
  ws();
  if (*jp) jfail("text after the object");

  /* The version first: another version may have other keys and types. */
  struct field *p = &fields[F_PROTOCOL];
  if (p->type == V_NONE) fail("--config: missing \"protocol\"");
  if (p->type != V_UINT) fail("--config: \"protocol\" must be an integer (this peer speaks protocol 1)");
  if (p->num != 1) fail("--config: unknown protocol %" PRIu64 " (this peer speaks protocol 1)", p->num);
  for (int i = F_CELL; i < NFIELDS; i++) {
    int want = i <= F_ADDRESS ? V_STR : V_UINT;
    if (fields[i].type == V_NONE) fail("--config: missing \"%s\"", fields[i].key);
    if ((int)fields[i].type != want)
      fail("--config: \"%s\" must be %s", fields[i].key, want == V_STR ? "a string" : "a non-negative integer");
  }
  const char *kind = fields[F_KIND].str, *transport = fields[F_TRANSPORT].str;
  if (strcmp(kind, "echo") && strcmp(kind, "bulk")) fail("--config: kind \"%s\" is not echo or bulk", kind);
  if (strcmp(transport, "tcp") && strcmp(transport, "udp") && strcmp(transport, "local"))
    fail("--config: transport \"%s\" is not tcp, udp or local", transport);
  if (!*fields[F_CELL].str) fail("--config: \"cell\" is empty");
  if (!*fields[F_ADDRESS].str) fail("--config: \"address\" is empty");
  max_message = fields[F_MAX_MESSAGE].num;
  idle_ms = fields[F_IDLE].num;
  parent_pid = fields[F_PARENT].num;
  if (max_message > MAX_MESSAGE_LIMIT) fail("--config: max_message %" PRIu64 " is above 2^40", max_message);
  if (idle_ms < 1) fail("--config: idle_timeout_ms must be at least 1");
  if (idle_ms > UINT64_C(1) << 40) idle_ms = UINT64_C(1) << 40; /* keeps deadlines from overflowing */
  if (parent_pid < 1 || parent_pid > INT_MAX) fail("--config: parent_pid %" PRIu64 " is not a pid", parent_pid);
}

/* ---- Bounded I/O on non-blocking sockets ----------------------------------------------- */

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits until fd is ready (or in error: the next call says which); 0 once the deadline passed. */
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) fail("poll: %s", strerror(errno));
  }
}

/* Reads n bytes; returns fewer only at end of stream. The idle timeout counts from the
 * last byte received, so a large message under QEMU is not cut off while it flows. */
static size_t read_full(int fd, unsigned char *buf, size_t n, uint64_t index) {
  size_t got = 0;
  int64_t deadline = now_ms() + (int64_t)idle_ms;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got < CHUNK ? n - got : CHUNK);
    if (r > 0) { got += (size_t)r; deadline = now_ms() + (int64_t)idle_ms; continue; }
    if (r == 0) return got;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) fail("message %" PRIu64 ": read: %s", index, strerror(errno));
    if (!wait_fd(fd, POLLIN, deadline))
      fail("message %" PRIu64 ": nothing received for %" PRIu64 " ms (idle timeout)", index, idle_ms);
  }
  return got;
}

/* Writes all of iov (partial writes resume where they stopped); bounded like reads. */
static void write_all(int fd, struct iovec *iov, int cnt, uint64_t index) {
  int64_t deadline = now_ms() + (int64_t)idle_ms;
  while (cnt > 0) {
    ssize_t w = writev(fd, iov, cnt);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail("message %" PRIu64 ": write: %s", index, strerror(errno));
      if (!wait_fd(fd, POLLOUT, deadline))
        fail("message %" PRIu64 ": reply not taken for %" PRIu64 " ms (idle timeout)", index, idle_ms);
      continue;
    }
    deadline = now_ms() + (int64_t)idle_ms;
    size_t done = (size_t)w;
    while (cnt > 0 && done >= iov->iov_len) { done -= iov->iov_len; iov++; cnt--; }
    if (cnt > 0) { iov->iov_base = (char *)iov->iov_base + done; iov->iov_len -= done; }
  }
}

static void maybe_corrupt(unsigned char *buf, size_t len, uint64_t index) {
  if (!corrupt_on || index != corrupt_index) return;
  if (corrupt_offset >= len)
    fail("message %" PRIu64 ": --corrupt offset %" PRIu64 " is past the end of its %zu-byte message", index,
         corrupt_offset, len);
  buf[corrupt_offset] ^= 0xFF;
}

static int connect_to(int domain, int type, const struct sockaddr *sa, socklen_t len, const char *addr) {
  int fd = socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket: %s", strerror(errno));
  if (domain == AF_INET && type == SOCK_STREAM) {
    int one = 1; /* replies go out at once, not held for coalescing */
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail("TCP_NODELAY: %s", strerror(errno));
  }
  int64_t deadline = now_ms() + (int64_t)idle_ms;
  while (connect(fd, sa, len) != 0) {
    if (errno == EINPROGRESS || errno == EALREADY) {
      if (!wait_fd(fd, POLLOUT, deadline)) fail("connect to %s: timed out", addr);
      int err = 0;
      socklen_t l = sizeof err;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
      if (err) fail("connect to %s: %s", addr, strerror(err));
      return fd;
    }
    if (errno == EAGAIN && domain == AF_UNIX && now_ms() < deadline) { /* backlog full: retry */
      struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    if (errno != EINTR) fail("connect to %s: %s", addr, strerror(errno));
  }
  return fd;
}

static void parse_ipv4(const char *s, struct sockaddr_in *sa) {
  const char *colon = strrchr(s, ':');
  char host[16];
  uint64_t port;
  size_t hl = colon ? (size_t)(colon - s) : 0;
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  if (!colon || hl == 0 || hl >= sizeof host) fail("address \"%s\" is not a.b.c.d:port", s);
  memcpy(host, s, hl);
  host[hl] = 0;
  const char *end = parse_u64(colon + 1, &port);
  if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 || !end || *end || port == 0 || port > 65535)
    fail("address \"%s\" is not a.b.c.d:port", s);
  sa->sin_port = htons((uint16_t)port);
}

/* ---- The echo loops ---------------------------------------------------------------------- */

static void serve_stream(int fd) __attribute__((noreturn));
static void serve_stream(int fd) {
  unsigned char *buf = NULL;
  size_t cap = 0;
  for (uint64_t i = 0;; i++) {
    unsigned char hdr[8];
    size_t got = read_full(fd, hdr, 8, i);
    if (got < 8)
      fail("message %" PRIu64 ": connection closed %s", i, got ? "inside the length prefix" : "without a goodbye");
    uint64_t len = 0;
    for (int b = 7; b >= 0; b--) len = len << 8 | hdr[b]; /* little-endian, by bytes */
    if (len == 0) { close(fd); exit(0); }                 /* goodbye: no reply */
    if (len > max_message)
      fail("message %" PRIu64 ": length %" PRIu64 " exceeds max_message %" PRIu64, i, len, max_message);
    if (len > SIZE_MAX / 2) fail("message %" PRIu64 ": length %" PRIu64 " is too large for this machine", i, len);
    if (len > cap) { /* grows to the largest message so far, never past max_message */
      free(buf);
      if (!(buf = malloc((size_t)len))) fail("message %" PRIu64 ": cannot allocate %" PRIu64 " bytes", i, len);
      cap = (size_t)len;
    }
    got = read_full(fd, buf, (size_t)len, i);
    if (got < len) fail("message %" PRIu64 ": connection closed after %zu of %" PRIu64 " bytes", i, got, len);
    maybe_corrupt(buf, (size_t)len, i);
    for (int b = 0; b < 8; b++) hdr[b] = (unsigned char)(len >> (8 * b));
    struct iovec iov[2] = {{hdr, 8}, {buf, (size_t)len}}; /* one writev: one segment with NODELAY */
    write_all(fd, iov, 2, i);
  }
}

static void send_dgram(int fd, const void *buf, size_t len, const char *what) {
  int64_t deadline = now_ms() + (int64_t)idle_ms;
  while (send(fd, buf, len, 0) < 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) fail("%s: send: %s", what, strerror(errno));
    if (!wait_fd(fd, POLLOUT, deadline)) fail("%s: send blocked for %" PRIu64 " ms (idle timeout)", what, idle_ms);
  }
}

static void serve_udp(int fd) __attribute__((noreturn));
static void serve_udp(int fd) {
  size_t cap = max_message < UDP_MAX ? (size_t)max_message : UDP_MAX;
  unsigned char *buf = malloc(cap ? cap : 1);
  char what[48];
  if (!buf) fail("out of memory");
  send_dgram(fd, HELLO, sizeof HELLO - 1, "hello");
  for (uint64_t i = 0;; i++) {
    int64_t deadline = now_ms() + (int64_t)idle_ms;
    ssize_t n;
    /* MSG_TRUNC returns the datagram's real length: one above cap is caught, not cut. */
    while ((n = recv(fd, buf, cap, MSG_TRUNC)) < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail("message %" PRIu64 ": recv: %s", i, strerror(errno));
      if (!wait_fd(fd, POLLIN, deadline))
        fail("message %" PRIu64 ": nothing received for %" PRIu64 " ms (idle timeout)", i, idle_ms);
    }
    if (n == 0) { close(fd); exit(0); } /* goodbye */
    if ((uint64_t)n > max_message)
      fail("message %" PRIu64 ": length %zd exceeds max_message %" PRIu64, i, n, max_message);
    maybe_corrupt(buf, (size_t)n, i);
    snprintf(what, sizeof what, "message %" PRIu64, i);
    send_dgram(fd, buf, (size_t)n, what);
  }
}

int main(int argc, char **argv) {
  int a = 1;
  while (a < argc && strcmp(argv[a], "serve") != 0) {
    const char *end;
    if (strcmp(argv[a], "--corrupt") || a + 1 >= argc || corrupt_on) usage();
    if (!(end = parse_u64(argv[a + 1], &corrupt_index)) || *end != ':' ||
        !(end = parse_u64(end + 1, &corrupt_offset)) || *end)
      fail("--corrupt wants N:OFFSET (two decimal numbers), not \"%s\"", argv[a + 1]);
    corrupt_on = 1;
    a += 2;
  }
  if (argc - a != 3 || strcmp(argv[a], "serve") || strcmp(argv[a + 1], "--config")) usage();
  parse_config(argv[a + 2]);

  signal(SIGPIPE, SIG_IGN); /* a closed socket is an error line, not a silent death */
  /* Die with the measuring process; if it is already gone, we were reparented. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
  if (getppid() != (pid_t)parent_pid)
    fail("parent_pid %" PRIu64 " is not this process's parent (%d): the measuring side is gone", parent_pid,
         (int)getppid());

  const char *transport = fields[F_TRANSPORT].str, *addr = fields[F_ADDRESS].str;
  if (!strcmp(transport, "local")) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(addr) >= sizeof sa.sun_path) fail("address \"%s\" is too long for a Unix socket", addr);
    strcpy(sa.sun_path, addr);
    serve_stream(connect_to(AF_UNIX, SOCK_STREAM, (struct sockaddr *)&sa, sizeof sa, addr));
  }
  struct sockaddr_in sa;
  parse_ipv4(addr, &sa);
  if (!strcmp(transport, "tcp"))
    serve_stream(connect_to(AF_INET, SOCK_STREAM, (struct sockaddr *)&sa, sizeof sa, addr));
  /* udp: bound to loopback when talking to loopback, else any; connect() keeps out other
   * senders and turns an ICMP "port unreachable" (measuring side gone) into an error. */
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket: %s", strerror(errno));
  struct sockaddr_in local = {.sin_family = AF_INET};
  int loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
  local.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
  if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) fail("bind: %s", strerror(errno));
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) fail("connect to %s: %s", addr, strerror(errno));
  serve_udp(fd);
}
