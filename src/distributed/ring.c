/* The ring backend over TCP (DESIGN §10). Configuration as MLX's ring: the rank in MLX_RANK
 * and a JSON hostfile in MLX_HOSTFILE (NUVEC_RANK / NUVEC_HOSTFILE take precedence): a list
 * with one entry per rank, each a list of "host:port" addresses (or one such string). Rank r
 * listens on each of its addresses; every pair of ranks is connected (a full mesh, so send and
 * recv work between any two ranks) with one socket per address index k (the higher rank
 * connects to the lower rank's address k, retrying until NUVEC_DIST_CONNECT_TIMEOUT seconds,
 * default 30, have passed). Every transfer is striped over the pair's sockets.
 *
 * all_sum/max/min run as a reduce-scatter then an all-gather around the ring, in both
 * directions at once (half of the data clockwise, half counter-clockwise); a received stripe
 * is reduced as its bytes arrive (pipelined with the transfer). all_gather is the gather
 * phase; sum_scatter the reduce-scatter phase, arranged so that rank r ends with part r. Each
 * part's reduction runs in one fixed order on one rank, so every rank gets the same bits.
 * Small all_reduces of a power-of-two group run by recursive doubling instead (pairwise
 * exchanges of the whole buffer, both ranks of a pair reducing it in rank order). Reductions
 * read this rank's input where it lies and write the output, so no copy of the input is made.
 *
 * A peer lost: a reset or closed connection fails at once; a peer that sends nothing for
 * NUVEC_DIST_TIMEOUT seconds fails after it. The error names the peer (NV_ERR_PEER_LOST), and
 * every socket of the job is then shut down so that the other ranks fail at once too instead
 * of waiting for their own timeout. Sub-groups (split) share their parent's connections (a
 * lock orders the groups' transfers on them). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "distributed/dist_internal.h"

#define MAX_SOCKETS 8
#define HELLO_MAGIC 0x6e757672u /* "nuvr" */

/* ---- Time ---- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- The hostfile ---- */

typedef struct hosts {
  int n;          /* ranks */
  int naddr;      /* addresses per rank used (the smallest count over ranks) */
  char ***addr;   /* addr[rank][k] */
  int *count;     /* addresses given per rank */
} hosts;

static void hosts_free(hosts *h) {
  for (int r = 0; h->addr && r < h->n; r++) {
    for (int k = 0; k < h->count[r]; k++) nv__free(h->addr[r][k]);
    nv__free(h->addr[r]);
  }
  nv__free(h->addr);
  nv__free(h->count);
  memset(h, 0, sizeof *h);
}

static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* A JSON string at p (no escapes but \" and \\); *end after it. NULL when malformed. */
static char *json_string(const char *p, const char **end) {
  if (*p != '"') return NULL;
  p++;
  size_t cap = 64, n = 0;
  char *s = nv__malloc(cap);
  if (!s) return NULL;
  for (; *p && *p != '"'; p++) {
    if (*p == '\\' && p[1]) p++;
    if (n + 2 > cap) {
      char *t = nv__realloc(s, cap *= 2);
      if (!t) {
        nv__free(s);
        return NULL;
      }
      s = t;
    }
    s[n++] = *p;
  }
  if (*p != '"') {
    nv__free(s);
    return NULL;
  }
  s[n] = 0;
  *end = p + 1;
  return s;
}

/* Appends address `s` to rank r's list. */
static bool hosts_add(hosts *h, int r, char *s) {
  char **a = nv__realloc(h->addr[r], (size_t)(h->count[r] + 1) * sizeof *a);
  if (!a) {
    nv__free(s);
    return false;
  }
  h->addr[r] = a;
  a[h->count[r]++] = s;
  return true;
}

static nv_status hosts_parse(const char *text, const char *path, hosts *h) {
  memset(h, 0, sizeof *h);
  const char *p = skip_ws(text);
  if (*p != '[') goto bad;
  p = skip_ws(p + 1);
  while (*p && *p != ']') {
    int r = h->n;
    char ***na = nv__realloc(h->addr, (size_t)(r + 1) * sizeof *na);
    if (na) h->addr = na;
    int *nc = na ? nv__realloc(h->count, (size_t)(r + 1) * sizeof *nc) : NULL;
    if (!nc) {
      hosts_free(h);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "init: out of memory reading %s", path);
    }
    h->count = nc;
    h->addr[r] = NULL;
    h->count[r] = 0;
    h->n++;
    if (*p == '"') {
      char *s = json_string(p, &p);
      if (!s || !hosts_add(h, r, s)) goto bad;
    } else if (*p == '[') {
      p = skip_ws(p + 1);
      while (*p == '"') {
        char *s = json_string(p, &p);
        if (!s || !hosts_add(h, r, s)) goto bad;
        p = skip_ws(p);
        if (*p == ',') p = skip_ws(p + 1);
      }
      if (*p != ']') goto bad;
      p++;
    } else {
      goto bad;
    }
    if (h->count[r] == 0) goto bad;
    p = skip_ws(p);
    if (*p == ',') p = skip_ws(p + 1);
  }
  if (*p != ']' || h->n == 0) goto bad;
  h->naddr = MAX_SOCKETS;
  for (int r = 0; r < h->n; r++)
    if (h->count[r] < h->naddr) h->naddr = h->count[r];
  return NV_OK;
bad:
  hosts_free(h);
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "init: the ring hostfile %s is not a JSON list of \"host:port\" addresses "
                       "(or of lists of them), one entry per rank",
                       path);
}

static nv_status hosts_load(const char *path, hosts *h) {
  FILE *f = fopen(path, "rb");
  if (!f) return nv__set_error(NV_ERR_IO, "init: cannot open the ring hostfile %s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = nv__malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += k;
    if (n + 1 == cap) {
      char *t = nv__realloc(buf, cap *= 2);
      if (!t) {
        nv__free(buf);
        buf = NULL;
      } else {
        buf = t;
      }
    }
  }
  fclose(f);
  if (!buf) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "init: out of memory reading %s", path);
  buf[n] = 0;
  nv_status st = hosts_parse(buf, path, h);
  nv__free(buf);
  return st;
}

/* "host:port" (the last colon splits; [v6] brackets allowed) resolved to a TCP address. */
static nv_status resolve(const char *a, struct sockaddr_storage *out, socklen_t *len) {
  const char *colon = strrchr(a, ':');
  if (!colon || !colon[1]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "init: the address '%s' has no port", a);
  char host[256];
  size_t hl = (size_t)(colon - a);
  if (hl >= sizeof host) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "init: the address '%s' is too long", a);
  memcpy(host, a, hl);
  host[hl] = 0;
  char *h = host;
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
    host[hl - 1] = 0;
    h = host + 1;
  }
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int e = getaddrinfo(h, colon + 1, &hints, &res);
  if (e || !res)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "init: cannot resolve '%s': %s", a, gai_strerror(e));
  memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return NV_OK;
}

/* ---- The mesh of connections ---- */

/* Each pair of ranks has `nsock` data sockets and one heartbeat socket: every rank's heartbeat
 * thread writes a byte to each peer every HEARTBEAT_MS and records when each peer's last byte
 * arrived. A transfer that makes no progress for the timeout fails only when the peer's
 * heartbeat is as old: a peer that is merely busy elsewhere (a long computation before it
 * joins the collective) is waited for, a stopped or hung one is lost. */
#define HEARTBEAT_MS 200

typedef struct mesh {
  atomic_int refs;
  pthread_mutex_t lock; /* one group's transfer at a time on the sockets */
  int rank, size, nsock;
  int stride; /* sockets per peer: nsock data sockets, then the heartbeat socket */
  int *fd;    /* fd[peer * stride + k]; -1 for this rank */
  bool dead;
  char *buf; /* scratch for received data to reduce */
  size_t cap;
  _Atomic int64_t *seen_ms; /* per peer: when its last heartbeat byte arrived */
  pthread_t beat;
  bool beating;
  atomic_bool stop;
} mesh;

static int64_t now_ms(void) { return (int64_t)(now() * 1000.0); }

static void *heartbeat(void *arg) {
  mesh *m = arg;
  int n = m->size;
  struct pollfd *pf = nv__malloc((size_t)n * sizeof *pf);
  int *who = nv__malloc((size_t)n * sizeof *who);
  bool *closed = nv__calloc((size_t)n, sizeof *closed);
  if (!pf || !who || !closed) { /* no heartbeat: peers are then judged by their transfers */
    for (int p = 0; p < n; p++) atomic_store(&m->seen_ms[p], INT64_MIN / 2);
    nv__free(pf);
    nv__free(who);
    nv__free(closed);
    return NULL;
  }
  int64_t next = 0;
  while (!atomic_load(&m->stop)) {
    int64_t t = now_ms();
    int np = 0;
    for (int p = 0; p < n; p++) {
      int fd = m->fd[p * m->stride + m->nsock];
      if (fd < 0 || closed[p]) continue;
      if (t >= next) {
        char b = 0;
        (void)!send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      pf[np] = (struct pollfd){fd, POLLIN, 0};
      who[np++] = p;
    }
    if (t >= next) next = t + HEARTBEAT_MS;
    if (np == 0) break;
    if (poll(pf, (nfds_t)np, 100) <= 0) continue;
    for (int i = 0; i < np; i++) {
      if (!pf[i].revents) continue;
      char sink[64];
      ssize_t k = recv(pf[i].fd, sink, sizeof sink, MSG_DONTWAIT);
      if (k > 0) atomic_store(&m->seen_ms[who[i]], now_ms());
      else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        closed[who[i]] = true; /* gone: its data sockets say so to the transfers */
    }
  }
  nv__free(pf);
  nv__free(who);
  nv__free(closed);
  return NULL;
}

/* Whether `peer`'s heartbeat is younger than `timeout` seconds. */
static bool alive(const mesh *m, int peer, double timeout) {
  return now_ms() - atomic_load(&m->seen_ms[peer]) < (int64_t)(timeout * 1000.0);
}

static void mesh_release(mesh *m) {
  if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
  atomic_store(&m->stop, true);
  if (m->beating) pthread_join(m->beat, NULL);
  for (int i = 0; i < m->size * m->stride; i++)
    if (m->fd[i] >= 0) close(m->fd[i]);
  nv__free(m->fd);
  nv__free((void *)m->seen_ms);
  nv__free(m->buf);
  pthread_mutex_destroy(&m->lock);
  nv__free(m);
}

/* Shuts every socket down (reads and writes fail from now on, at the peers too). */
static void mesh_kill(mesh *m) {
  m->dead = true;
  for (int i = 0; i < m->size * m->stride; i++)
    if (m->fd[i] >= 0) shutdown(m->fd[i], SHUT_RDWR);
}

static void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static bool write_all_blocking(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

/* Reads n bytes within `deadline` (fd non-blocking). */
static bool read_all_deadline(int fd, void *p, size_t n, double deadline) {
  char *c = p;
  while (n) {
    ssize_t k = recv(fd, c, n, 0);
    if (k > 0) {
      c += k;
      n -= (size_t)k;
      continue;
    }
    if (k == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    double left = deadline - now();
    if (left <= 0) return false;
    struct pollfd pf = {fd, POLLIN, 0};
    poll(&pf, 1, (int)(left * 1000) + 1);
  }
  return true;
}

static double connect_timeout(void) {
  const char *v = getenv("NUVEC_DIST_CONNECT_TIMEOUT");
  if (v && *v) {
    char *end;
    double t = strtod(v, &end);
    if (!*end && t > 0) return t;
  }
  return 30.0;
}

/* Connects to `a` with retries until the deadline. -1 with the error set. */
static int connect_retry(const char *a, double deadline, int peer) {
  struct sockaddr_storage sa;
  socklen_t len;
  if (resolve(a, &sa, &len) != NV_OK) return -1;
  int last = 0;
  for (;;) {
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      nv__set_error(NV_ERR_BACKEND, "init: socket: %s", strerror(errno));
      return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, len) == 0) return fd;
    last = errno;
    close(fd);
    if (now() >= deadline) break;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  nv__set_error(NV_ERR_PEER_LOST, "init: cannot connect to rank %d at %s: %s", peer, a,
                strerror(last));
  return -1;
}

static int listen_on(const char *a) {
  struct sockaddr_storage sa;
  socklen_t len;
  if (resolve(a, &sa, &len) != NV_OK) return -1;
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    nv__set_error(NV_ERR_BACKEND, "init: socket: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 128) != 0) {
    nv__set_error(NV_ERR_BACKEND, "init: cannot listen on %s: %s", a, strerror(errno));
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

/* Connects the full mesh: listens on this rank's addresses, connects to every lower rank (each
 * socket announced by a hello: magic, rank, socket index), accepts the higher ranks'. */
static nv_status mesh_connect(const hosts *h, int rank, mesh **out) {
  int size = h->n, ns = h->naddr, stride = ns + 1;
  mesh *m = nv__calloc(1, sizeof *m);
  int *fd = m ? nv__malloc((size_t)size * (size_t)stride * sizeof *fd) : NULL;
  _Atomic int64_t *seen = fd ? nv__malloc((size_t)size * sizeof *seen) : NULL;
  int lfd[MAX_SOCKETS];
  if (!seen) {
    nv__free(fd);
    nv__free(m);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "init: out of memory");
  }
  for (int i = 0; i < size * stride; i++) fd[i] = -1;
  for (int p = 0; p < size; p++) atomic_init(&seen[p], 0);
  m->seen_ms = seen;
  m->stride = stride;
  atomic_init(&m->stop, false);
  atomic_init(&m->refs, 1);
  pthread_mutex_init(&m->lock, NULL);
  m->rank = rank;
  m->size = size;
  m->nsock = ns;
  m->fd = fd;
  nv_status st = NV_OK;
  int nl = 0;
  for (; nl < ns; nl++)
    if ((lfd[nl] = listen_on(h->addr[rank][nl])) < 0) break;
  if (nl < ns) st = nv__last_status();
  double deadline = now() + connect_timeout();
  for (int p = 0; st == NV_OK && p < rank; p++)
    for (int k = 0; st == NV_OK && k <= ns; k++) { /* k == ns: the heartbeat, at address 0 */
      int c = connect_retry(h->addr[p][k < ns ? k : 0], deadline, p);
      if (c < 0) {
        st = nv__last_status();
        break;
      }
      uint32_t hello[3] = {HELLO_MAGIC, (uint32_t)rank, (uint32_t)k};
      if (!write_all_blocking(c, hello, sizeof hello)) {
        close(c);
        st = nv__set_error(NV_ERR_PEER_LOST, "init: rank %d closed the connection at setup", p);
        break;
      }
      fd[p * stride + k] = c;
    }
  int expect = (size - 1 - rank) * stride;
  while (st == NV_OK && expect > 0) {
    struct pollfd pf[MAX_SOCKETS];
    for (int k = 0; k < ns; k++) pf[k] = (struct pollfd){lfd[k], POLLIN, 0};
    double left = deadline - now();
    if (left <= 0 || poll(pf, (nfds_t)ns, (int)(left * 1000) + 1) < 0) {
      if (left <= 0 || errno != EINTR) {
        st = nv__set_error(NV_ERR_PEER_LOST,
                           "init: %d connections from higher ranks did not arrive within %.0f s",
                           expect, connect_timeout());
      }
      continue;
    }
    for (int k = 0; k < ns && st == NV_OK; k++) {
      if (!(pf[k].revents & POLLIN)) continue;
      int c = accept(lfd[k], NULL, NULL);
      if (c < 0) continue;
      fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
      uint32_t hello[3];
      if (!read_all_deadline(c, hello, sizeof hello, deadline) || hello[0] != HELLO_MAGIC ||
          hello[1] <= (uint32_t)rank || hello[1] >= (uint32_t)size || hello[2] > (uint32_t)ns ||
          fd[hello[1] * (uint32_t)stride + hello[2]] >= 0) {
        close(c); /* not one of ours: a stray connection */
        continue;
      }
      fd[hello[1] * (uint32_t)stride + hello[2]] = c;
      expect--;
    }
  }
  for (int k = 0; k < nl; k++) close(lfd[k]);
  for (int i = 0; i < size * stride; i++)
    if (fd[i] >= 0) {
      fcntl(fd[i], F_SETFL, fcntl(fd[i], F_GETFL) | O_NONBLOCK);
      tune(fd[i]);
    }
  if (st != NV_OK) {
    mesh_release(m);
    return st;
  }
  int64_t t = now_ms();
  for (int p = 0; p < size; p++) atomic_store(&seen[p], t);
  m->beating = pthread_create(&m->beat, NULL, heartbeat, m) == 0;
  if (!m->beating) /* without the thread every peer looks silent: judge by transfers alone */
    for (int p = 0; p < size; p++) atomic_store(&seen[p], INT64_MAX / 2);
  *out = m;
  return NV_OK;
}

/* ---- The communicator ---- */

typedef struct ring {
  nv__comm base;
  mesh *m;
  int *map; /* group rank -> mesh rank */
} ring;

/* Tuning, measured on the loopback (bench/bench_distributed.py):
 * - an all_reduce of a power-of-two group takes recursive doubling up to DOUBLING_2 bytes with 2
 *   ranks (one exchange instead of the ring's two steps; the same bytes) and DOUBLING_N with
 *   more (log2(n) exchanges of everything instead of 2 (n - 1) steps of 1/n each: fewer
 *   rounds, more bytes);
 * - a transfer of at most ONE_SOCKET bytes uses one socket of the pair: every extra piece on
 *   the wire is another wake-up of the receiver;
 * - a reducing receive reads into a WINDOW-byte area per socket, reused as it is reduced, so
 *   that the reduction reads what the kernel just wrote while it is in the cache (instead of a
 *   scratch buffer as large as the message);
 * - a transfer that makes no progress polls its sockets for SPIN_NS before sleeping in poll: a
 *   sleeping thread is woken tens of microseconds later than a spinning one sees the data. */
#define DOUBLING_2 ((size_t)1 << 20)
#define DOUBLING_N ((size_t)256 << 10)
#define ONE_SOCKET_BYTES ((size_t)1 << 20)
#define WINDOW ((size_t)128 << 10)
#define SPIN_NS 20000

static size_t doubling_limit(int size) { return size == 2 ? DOUBLING_2 : DOUBLING_N; }

/* One transfer on one socket: `len` bytes at p. A receive that reduces combines its completed
 * elements as they arrive: dst = op(own, received), or op(received, own) when `peer_first`
 * (the operands in rank order, so that both ends of a pairwise exchange get the same bits).
 * dst may be `own` itself; when dst is also being sent (gate >= 0, the index of that send in
 * the same list, over the same bytes), the reduction never overtakes what was sent. */
typedef struct xfer {
  int fd, peer; /* peer: group rank, for messages */
  bool send;
  char *p;
  size_t len, done;
  char *dst;       /* reduce target (NULL: plain receive into p) */
  const char *own; /* this rank's operand */
  bool peer_first;
  int gate;
  size_t reduced;
  size_t win; /* a receive that reduces: p is a window of this many bytes, reused as it is
                 reduced (0: p holds all len bytes) */
} xfer;

typedef struct reduce_spec {
  nv_dtype dtype;
  int op;
} reduce_spec;

static nv_status lost(ring *r, int peer, const char *what) {
  mesh_kill(r->m);
  return nv__set_error(NV_ERR_PEER_LOST, "rank %d %s", peer, what);
}

/* The pipelined reduction of t's elements received so far (and, gated, sent so far). */
static void reduce_arrived(const xfer *x, xfer *t, const reduce_spec *rs, size_t isz) {
  size_t upto = t->done;
  if (t->gate >= 0 && x[t->gate].done < upto) upto = x[t->gate].done;
  upto = upto / isz * isz;
  while (t->reduced < upto) {
    size_t at = t->reduced, off = t->win ? at % t->win : at, k = upto - at;
    if (t->win && k > t->win - off) k = t->win - off;
    const char *mine = t->own + at, *got = t->p + off;
    nv__dist_reduce3(t->dst + at, t->peer_first ? got : mine, t->peer_first ? mine : got,
                     k / isz, rs->dtype, rs->op);
    t->reduced += k;
  }
}

/* Moves t's bytes until the socket has no more room or data (or a window has no room before
 * its reduction catches up), reducing what arrives at once, while it is in the cache. false
 * with the error set when the peer is gone. */
static bool pump(ring *r, const xfer *x, xfer *t, const reduce_spec *rs, size_t isz, bool *moved) {
  while (t->done < t->len) {
    size_t want = t->len - t->done;
    char *at = t->p + t->done;
    if (t->win) { /* the bytes [reduced, done) are still in the window */
      size_t off = t->done % t->win, room = t->reduced + t->win - t->done;
      if (want > t->win - off) want = t->win - off;
      if (want > room) want = room;
      if (!want) break;
      at = t->p + off;
    }
    ssize_t k = t->send ? send(t->fd, at, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(t->fd, at, want, MSG_DONTWAIT);
    if (k > 0) {
      t->done += (size_t)k;
      *moved = true;
      if (t->dst) reduce_arrived(x, t, rs, isz);
      continue;
    }
    if (k == 0 && !t->send) {
      lost(r, t->peer, "closed the connection (it exited or failed)");
      return false;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    lost(r, t->peer, errno == ECONNRESET || errno == EPIPE ? "reset the connection (it exited or failed)"
                                                           : strerror(errno));
    return false;
  }
  return true;
}

/* Waits for sockets that went quiet, spinning SPIN_NS before sleeping in poll (a reply on the
 * loopback or a LAN usually comes within microseconds). Returns poll's result. */
static int wait_ready(struct pollfd *pf, int np, int ms) {
  double until = now() + SPIN_NS * 1e-9;
  do {
    int e = poll(pf, (nfds_t)np, 0);
    if (e != 0) return e;
  } while (now() < until);
  return poll(pf, (nfds_t)np, ms);
}

/* Runs the transfers to completion, all at once. A peer that makes no progress for the timeout
 * (while a transfer with it is pending) is lost. */
static nv_status progress(ring *r, xfer *x, int n, const reduce_spec *rs) {
  if (r->m->dead)
    return nv__set_error(NV_ERR_PEER_LOST,
                         "the group's connections were shut down by an earlier failure");
  double timeout = nv__dist_timeout(), last = now();
  size_t isz = rs ? nv_dtype_size(rs->dtype) : 1;
  struct pollfd pf[64];
  int idx[64];
  for (;;) {
    int np = 0;
    bool moved = false;
    for (int i = 0; i < n; i++) {
      xfer *t = &x[i];
      /* Transfers sharing a socket and a direction go in list order (the peer lists them in
       * the same order), one at a time. */
      bool behind = false;
      for (int j = 0; j < i && !behind; j++)
        behind = x[j].fd == t->fd && x[j].send == t->send && x[j].done < x[j].len;
      if (!behind && !pump(r, x, t, rs, isz, &moved)) return nv__last_status();
      if (t->dst) reduce_arrived(x, t, rs, isz);
      /* A receive whose bytes are all in, or whose window is full, waits only for its
       * gate's send (polled there). */
      bool full = t->win && t->done == t->reduced + t->win;
      if (t->done < t->len && !full && np < 64) {
        pf[np] = (struct pollfd){t->fd, (short)(t->send ? POLLOUT : POLLIN), 0};
        idx[np++] = i;
      }
    }
    if (np == 0) return NV_OK; /* gates come before their receives: all is reduced */
    double t0 = now();
    if (moved) last = t0;
    double left = last + timeout - t0;
    if (left <= 0) {
      /* Stalled for the timeout: lost if a pending peer's heartbeat is as old, else it is
       * busy elsewhere and the transfer waits on. */
      int peer = -1;
      for (int i = 0; i < np && peer < 0; i++)
        if (!alive(r->m, r->map[x[idx[i]].peer], timeout)) peer = x[idx[i]].peer;
      if (peer < 0) {
        last = t0;
        continue;
      }
      char what[96];
      snprintf(what, sizeof what, "did not answer within %g s (NUVEC_DIST_TIMEOUT)", timeout);
      return lost(r, peer, what);
    }
    int w = (int)(left * 1000) + 1;
    if (w > 1000) w = 1000;
    int e = wait_ready(pf, np, w);
    if (e < 0 && errno != EINTR) return lost(r, x[idx[0]].peer, strerror(errno));
    for (int i = 0; i < np && e > 0; i++)
      if (pf[i].revents & (POLLERR | POLLHUP) && !(pf[i].revents & POLLIN)) {
        xfer *t = &x[idx[i]];
        if (t->send) return lost(r, t->peer, "reset the connection (it exited or failed)");
      }
  }
}

/* Adds the stripes of one transfer of `len` bytes with group rank `peer` to x[*n]: one per
 * socket (of the first `ns` of the pair), each a whole number of `align`-byte elements (both
 * sides split alike). A receive that reduces (dst not NULL) combines into dst from `own` as
 * xfer says; `gate` is the index of the first stripe of the send of dst's bytes, or -1. */
static void stripes(ring *r, xfer *x, int *n, int peer, bool send, char *p, size_t len, int ns,
                    char *dst, const char *own, bool peer_first, int gate, size_t align) {
  mesh *m = r->m;
  int mp = r->map[peer];
  if (ns > m->nsock) ns = m->nsock;
  size_t per = (len / align + (size_t)ns - 1) / (size_t)ns * align;
  size_t win = dst && per > WINDOW ? WINDOW / align * align : 0;
  for (int k = 0; k < ns; k++) {
    size_t a = (size_t)k * per;
    if (a >= len) break;
    size_t b = a + per < len ? a + per : len;
    x[(*n)++] = (xfer){m->fd[mp * m->stride + k], peer,  send, win ? p + (size_t)k * win : p + a,
                       b - a, 0, dst ? dst + a : NULL, own ? own + a : NULL, peer_first,
                       gate >= 0 ? gate + k : -1, 0, win};
  }
}

/* Scratch bytes a reducing receive of len bytes over ns sockets takes (stripes' layout): len
 * itself, or ns windows. */
static size_t window_need(size_t len, int ns) {
  return len <= WINDOW ? len : (size_t)ns * WINDOW;
}

/* The scratch buffer of at least n bytes (under the mesh lock). */
static char *scratch(mesh *m, size_t n) {
  if (n <= m->cap) return m->buf;
  char *b = nv__realloc(m->buf, n);
  if (!b) return NULL;
  m->buf = b;
  m->cap = n;
  return b;
}

/* Segments of the ring algorithms: for direction d (0 clockwise, 1 counter-clockwise) and
 * segment k (0..size-1), its start (bytes from base) and length. `src` is this rank's data
 * in the same layout (base itself when the reduction runs in place). */
typedef struct segs {
  char *base;
  const char *src;
  size_t isz; /* element bytes: stripes are whole elements */
  size_t *start[2], *len[2];
} segs;

static size_t seg_len(const segs *s, int d, int k) { return s->len[d][k]; }
static char *seg_ptr(const segs *s, int d, int k) { return s->base + s->start[d][k]; }
static const char *seg_src(const segs *s, int d, int k) { return s->src + s->start[d][k]; }

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Fills a table for `size` segments per direction in whole elements of isz bytes. Whole
 * buffer (per_part false): `count` elements, the first half split into the clockwise
 * segments, the second half into the counter-clockwise ones. Per part (per_part true): `size`
 * parts of `count` elements; segment k of direction 0 is the first half of part k, of
 * direction 1 its second half. The table's memory goes to *store (freed by the caller). */
static nv_status segs_make(segs *s, int size, char *base, const char *src, size_t count,
                           size_t isz, bool per_part, size_t **store) {
  size_t *o = nv__malloc(4 * (size_t)size * sizeof *o);
  if (!o) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  *store = o;
  s->base = base;
  s->src = src;
  s->isz = isz;
  for (int d = 0; d < 2; d++) {
    s->start[d] = o + (size_t)(2 * d) * (size_t)size;
    s->len[d] = o + (size_t)(2 * d + 1) * (size_t)size;
  }
  size_t h0 = count / 2, h1 = count - h0;
  for (int k = 0; k < size; k++) {
    if (per_part) {
      s->start[0][k] = (size_t)k * count * isz;
      s->len[0][k] = h0 * isz;
      s->start[1][k] = ((size_t)k * count + h0) * isz;
      s->len[1][k] = h1 * isz;
    } else {
      size_t a0 = (size_t)((uint64_t)h0 * (uint64_t)k / (uint64_t)size);
      size_t b0 = (size_t)((uint64_t)h0 * (uint64_t)(k + 1) / (uint64_t)size);
      size_t a1 = (size_t)((uint64_t)h1 * (uint64_t)k / (uint64_t)size);
      size_t b1 = (size_t)((uint64_t)h1 * (uint64_t)(k + 1) / (uint64_t)size);
      s->start[0][k] = a0 * isz;
      s->len[0][k] = (b0 - a0) * isz;
      s->start[1][k] = (h0 + a1) * isz;
      s->len[1][k] = (b1 - a1) * isz;
    }
  }
  return NV_OK;
}

/* One ring step in both directions: direction d sends segment snd[d] to its next rank and
 * receives segment rcv[d] from its previous one, reducing it with this rank's data into base
 * (rs) or storing it. `raw`: the segments sent are this rank's own data (the first step of
 * the reduce-scatter, read from src). */
static nv_status ring_step(ring *r, const segs *s, const int *snd, const int *rcv,
                           const reduce_spec *rs, char *tmp, bool raw) {
  int size = r->base.size, me = r->base.rank, ns = r->m->nsock;
  size_t need = 0;
  for (int d = 0; d < 2; d++) {
    size_t w = window_need(seg_len(s, d, rcv[d]), ns);
    need = w > need ? w : need;
  }
  xfer x[4 * MAX_SOCKETS];
  int n = 0;
  size_t toff = 0;
  for (int d = 0; d < 2; d++) {
    int next = mod(me + (d ? -1 : 1), size), prev = mod(me + (d ? 1 : -1), size);
    size_t sl = seg_len(s, d, snd[d]), rl = seg_len(s, d, rcv[d]);
    char *from = raw ? (char *)seg_src(s, d, snd[d]) : seg_ptr(s, d, snd[d]);
    if (sl) stripes(r, x, &n, next, true, from, sl, ns, NULL, NULL, false, -1, s->isz);
    if (rl) {
      char *at = seg_ptr(s, d, rcv[d]);
      if (rs) {
        stripes(r, x, &n, prev, false, tmp + toff, rl, ns, at, seg_src(s, d, rcv[d]), false, -1,
                s->isz);
        toff += need;
      } else {
        stripes(r, x, &n, prev, false, at, rl, ns, NULL, NULL, false, -1, s->isz);
      }
    }
  }
  return progress(r, x, n, rs);
}

/* The reduce-scatter phase: afterwards this rank holds segment `rank` of both directions
 * reduced over the group (in base; the segments it only sent keep whatever base had). */
static nv_status reduce_scatter_phase(ring *r, const segs *s, const reduce_spec *rs) {
  int size = r->base.size, me = r->base.rank;
  size_t most = 0;
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < size; k++)
      if (seg_len(s, d, k) > most) most = seg_len(s, d, k);
  size_t need = 2 * window_need(most, r->m->nsock);
  char *tmp = scratch(r->m, need + 1);
  if (!tmp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", need);
  for (int st = 0; st < size - 1; st++) {
    int snd[2] = {mod(me - (st + 1), size), mod(me + (st + 1), size)};
    int rcv[2] = {mod(me - (st + 2), size), mod(me + (st + 2), size)};
    nv_status e = ring_step(r, s, snd, rcv, rs, tmp, st == 0);
    if (e != NV_OK) return e;
  }
  return NV_OK;
}

/* The all-gather phase: each rank starts with its segment `rank` (both directions) complete. */
static nv_status gather_phase(ring *r, const segs *s) {
  int size = r->base.size, me = r->base.rank;
  for (int st = 0; st < size - 1; st++) {
    int snd[2] = {mod(me - st, size), mod(me + st, size)};
    int rcv[2] = {mod(me - (st + 1), size), mod(me + (st + 1), size)};
    nv_status e = ring_step(r, s, snd, rcv, NULL, NULL, false);
    if (e != NV_OK) return e;
  }
  return NV_OK;
}

/* Small messages by recursive doubling (a power-of-two group): in step k every rank exchanges
 * all it has with the rank whose number differs in bit k, and both reduce the pair in rank
 * order (so both get the same bits) as the bytes arrive. log2(size) exchanges instead of the
 * ring's 2 (size - 1): for messages whose time is the rounds' latency rather than the bytes. */
static nv_status doubling(ring *r, const char *in, char *out, size_t count, const reduce_spec *rs) {
  int size = r->base.size, me = r->base.rank;
  size_t isz = nv_dtype_size(rs->dtype), bytes = count * isz;
  int ns = bytes <= ONE_SOCKET_BYTES ? 1 : r->m->nsock;
  size_t need = window_need(bytes, ns);
  char *tmp = scratch(r->m, need + 1);
  if (!tmp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", need);
  const char *cur = in;
  for (int bit = 1; bit < size; bit <<= 1) {
    int partner = me ^ bit, n = 0;
    xfer x[2 * MAX_SOCKETS];
    stripes(r, x, &n, partner, true, (char *)cur, bytes, ns, NULL, NULL, false, -1, isz);
    /* Reducing into what is being sent (cur == out) waits for those bytes to be sent. */
    stripes(r, x, &n, partner, false, tmp, bytes, ns, out, cur, partner < me, cur == out ? 0 : -1,
            isz);
    nv_status st = progress(r, x, n, rs);
    if (st != NV_OK) return st;
    cur = out;
  }
  return NV_OK;
}


/* ---- The communicator's operations (under the mesh lock) ---- */

#define RING(c) ((ring *)(c))

static bool pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static nv_status ring_all_reduce(nv__comm *c, const void *in, void *out, size_t count,
                                 nv_dtype dtype, int op) {
  ring *r = RING(c);
  size_t isz = nv_dtype_size(dtype), bytes = count * isz;
  reduce_spec rs = {dtype, op};
  if (count == 0) return NV_OK;
  nv_status st;
  if (pow2(c->size) && bytes <= doubling_limit(c->size)) {
    pthread_mutex_lock(&r->m->lock);
    st = doubling(r, in, out, count, &rs);
    pthread_mutex_unlock(&r->m->lock);
    return st;
  }
  segs s;
  size_t *store = NULL;
  st = segs_make(&s, c->size, out, in, count, isz, false, &store);
  if (st != NV_OK) return st;
  pthread_mutex_lock(&r->m->lock);
  st = reduce_scatter_phase(r, &s, &rs);
  if (st == NV_OK) st = gather_phase(r, &s);
  pthread_mutex_unlock(&r->m->lock);
  nv__free(store);
  return st;
}

static nv_status ring_all_gather(nv__comm *c, const void *in, void *out, size_t n) {
  ring *r = RING(c);
  memcpy((char *)out + (size_t)c->rank * n, in, n);
  segs s;
  size_t *store = NULL;
  nv_status st = segs_make(&s, c->size, out, out, n, 1, true, &store);
  if (st != NV_OK) return st;
  pthread_mutex_lock(&r->m->lock);
  st = gather_phase(r, &s);
  pthread_mutex_unlock(&r->m->lock);
  nv__free(store);
  return st;
}

static nv_status ring_sum_scatter(nv__comm *c, const void *in, void *out, size_t count,
                                  nv_dtype dtype) {
  ring *r = RING(c);
  size_t isz = nv_dtype_size(dtype), total = count * (size_t)c->size * isz;
  char *work = nv__malloc(total ? total : 1);
  if (!work) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", total);
  segs s;
  size_t *store = NULL;
  nv_status st = segs_make(&s, c->size, work, in, count, isz, true, &store);
  if (st == NV_OK) {
    reduce_spec rs = {dtype, NV__RED_SUM};
    pthread_mutex_lock(&r->m->lock);
    st = reduce_scatter_phase(r, &s, &rs);
    pthread_mutex_unlock(&r->m->lock);
    nv__free(store);
  }
  if (st == NV_OK) memcpy(out, work + (size_t)c->rank * count * isz, count * isz);
  nv__free(work);
  return st;
}

static nv_status ring_p2p(nv__comm *c, void *buf, size_t n, int peer, bool send) {
  ring *r = RING(c);
  xfer x[MAX_SOCKETS];
  int k = 0;
  stripes(r, x, &k, peer, send, buf, n, MAX_SOCKETS, NULL, NULL, false, -1, 1);
  pthread_mutex_lock(&r->m->lock);
  nv_status st = progress(r, x, k, NULL);
  pthread_mutex_unlock(&r->m->lock);
  return st;
}

static nv_status ring_send(nv__comm *c, const void *buf, size_t n, int dst) {
  return ring_p2p(c, (void *)buf, n, dst, true);
}

static nv_status ring_recv(nv__comm *c, void *buf, size_t n, int src) {
  return ring_p2p(c, buf, n, src, false);
}

static nv_status ring_health(nv__comm *c) {
  ring *r = RING(c);
  mesh *m = r->m;
  pthread_mutex_lock(&m->lock);
  nv_status st = NV_OK;
  if (m->dead)
    st = nv__set_error(NV_ERR_PEER_LOST,
                       "the group's connections were shut down by an earlier failure");
  for (int p = 0; st == NV_OK && p < c->size; p++) {
    if (p == c->rank) continue;
    for (int k = 0; k < m->nsock && st == NV_OK; k++) {
      int fd = m->fd[r->map[p] * m->stride + k];
      struct pollfd pf = {fd, POLLRDHUP, 0};
      if (poll(&pf, 1, 0) <= 0 || !(pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
      int pending = 0;
      if (ioctl(fd, FIONREAD, &pending) == 0 && pending > 0 && !(pf.revents & POLLERR))
        continue; /* it closed after sending data not read yet: not lost until that is read */
      st = lost(r, p, "is gone (its connection was closed)");
    }
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

static void ring_destroy(nv__comm *c) {
  ring *r = RING(c);
  mesh_release(r->m);
  nv__free(r->map);
  nv__free(r);
}

static nv_status ring_split(nv__comm *c, int color, int key, nv__comm **out);

static const nv__comm_ops ring_ops = {ring_all_reduce, ring_all_gather, ring_sum_scatter,
                                      ring_send,       ring_recv,       ring_split,
                                      ring_health,     ring_destroy};

static ring *ring_new(mesh *m, int rank, int size, int *map) {
  ring *r = nv__calloc(1, sizeof *r);
  if (!r) return NULL;
  r->base = (nv__comm){&ring_ops, "ring", rank, size};
  r->m = m;
  atomic_fetch_add(&m->refs, 1);
  r->map = map;
  return r;
}

/* The (color, key, rank) triples of every rank: the new group is those of this rank's color,
 * ordered by key, then rank. */
typedef struct member {
  int32_t color, key, rank;
} member;

static int member_cmp(const void *a, const void *b) {
  const member *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static nv_status ring_split(nv__comm *c, int color, int key, nv__comm **out) {
  ring *r = RING(c);
  int size = c->size;
  member me = {color, key < 0 ? c->rank : key, c->rank};
  member *all = nv__malloc((size_t)size * sizeof *all);
  if (!all) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  nv_status st = ring_all_gather(c, &me, all, sizeof me);
  if (st != NV_OK) {
    nv__free(all);
    return st;
  }
  int n = 0;
  for (int i = 0; i < size; i++)
    if (all[i].color == color) all[n++] = all[i];
  qsort(all, (size_t)n, sizeof *all, member_cmp);
  *out = NULL;
  if (n > 1) {
    int *map = nv__malloc((size_t)n * sizeof *map), rank = 0;
    if (!map) {
      nv__free(all);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++) {
      map[i] = r->map[all[i].rank];
      if (all[i].rank == c->rank) rank = i;
    }
    ring *sub = ring_new(r->m, rank, n, map);
    if (!sub) {
      nv__free(map);
      nv__free(all);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    }
    *out = &sub->base;
  }
  nv__free(all);
  return NV_OK;
}

static const char *env2(const char *a, const char *b) {
  const char *v = getenv(a);
  return v && *v ? v : getenv(b);
}

nv_status nv__ring_init(nv__comm **out, bool *configured) {
  *out = NULL;
  *configured = false;
  const char *rank_s = env2("NUVEC_RANK", "MLX_RANK");
  const char *path = env2("NUVEC_HOSTFILE", "MLX_HOSTFILE");
  if (!rank_s || !*rank_s || !path || !*path) return NV_OK;
  *configured = true;
  char *end;
  long rank = strtol(rank_s, &end, 10);
  hosts h;
  nv_status st = hosts_load(path, &h);
  if (st != NV_OK) return st;
  if (*end || rank < 0 || rank >= h.n) {
    int n = h.n;
    hosts_free(&h);
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "init: the rank '%s' is not one of the hostfile's %d ranks", rank_s, n);
  }
  if (h.n == 1) {
    hosts_free(&h);
    return NV_OK;
  }
  mesh *m = NULL;
  st = mesh_connect(&h, (int)rank, &m);
  int size = h.n;
  hosts_free(&h);
  if (st != NV_OK) return st;
  int *map = nv__malloc((size_t)size * sizeof *map);
  ring *r = map ? ring_new(m, (int)rank, size, map) : NULL;
  mesh_release(m); /* the ring holds its own reference */
  if (!r) {
    nv__free(map);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "init: out of memory");
  }
  for (int i = 0; i < size; i++) map[i] = i;
  *out = &r->base;
  return NV_OK;
}
