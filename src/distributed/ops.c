/* The collectives as lazy ops (DESIGN §10, seed 004 D12, D22-D36): builders, the run of one
 * collective over its group (shared by the CPU kernels here and the CUDA backend's jobs), the
 * send header, and the CPU kernels. */
#define NV_DIST_NO_CALLER_LOCATION /* the builders themselves */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/backend.h"
#include "core/convert.h"
#include "core/strided.h"
#include "distributed/dist_internal.h"
#include "distributed/dist_ops.h"
#include "ops/ops_internal.h"

#define HEADER_BYTES 512
#define DRAIN_CHUNK (1u << 20)

/* ---- The builders' callers (D34) ---- */

/* File names, interned: a node keeps a pointer for its errors, so they are never freed. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static char **names;
static size_t nnames, cnames;

static const char *intern(const char *file) {
  const char *found = NULL;
  pthread_mutex_lock(&names_lock);
  for (size_t i = 0; i < nnames && !found; i++)
    if (!strcmp(names[i], file)) found = names[i];
  if (!found) {
    if (nnames == cnames) {
      size_t nc = cnames ? 2 * cnames : 16;
      char **grown = nv__realloc(names, nc * sizeof *grown);
      if (grown) {
        names = grown;
        cnames = nc;
      }
    }
    size_t len = strlen(file);
    char *copy = nnames < cnames ? nv__malloc(len + 1) : NULL;
    if (copy) { /* out of memory: no place (the errors just do not name it) */
      memcpy(copy, file, len + 1);
      names[nnames++] = copy;
      found = copy;
    }
  }
  pthread_mutex_unlock(&names_lock);
  return found;
}

/* The place set for the next builder (pending) and the one of the builder running (here). */
static _Thread_local const char *pending_file;
static _Thread_local int pending_line;
static _Thread_local const char *here_file;
static _Thread_local int here_line;

void nv_dist_set_caller(const char *file, int line) {
  pending_file = file ? intern(file) : NULL;
  pending_line = line;
}

void nv__dist_take_caller(const char **file, int *line) {
  *file = pending_file;
  *line = pending_line;
  pending_file = NULL;
}

/* A builder starts: the caller set for it becomes the one its errors and node carry. */
static void begin(void) { nv__dist_take_caller(&here_file, &here_line); }

/* " (op called at file:line)", or "" without a place. */
static void place(char *buf, size_t cap, const char *op, const char *file, int line) {
  if (file) snprintf(buf, cap, " (%s called at %s:%d)", op, file, line);
  else buf[0] = 0;
}

/* A failed array of this builder: "op: message (op called at file:line)". */
static nv_array *op_error(nv_status st, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static nv_array *op_error(nv_status st, const char *op, const char *fmt, ...) {
  char msg[700], at[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  place(at, sizeof at, op, here_file, here_line);
  return nv__op_error(st, op, "%s%s", msg, at);
}

/* ---- Builders ---- */

/* A new handle on x's data: what a collective on a size-1 group returns. */
static nv_array *same(const nv_array *x) {
  return nv__array_new(nv__node_retain(x->node), x->idx);
}

/* The node of `prim` over x (NULL for recv) with the given output metadata. */
static nv_array *node(int prim, const nv_array *x, nv_dtype dtype, const int *shape, int ndim,
                      nv_group g, int peer) {
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(prim, x ? in : NULL, x ? 1 : 0, dtype, shape, ndim,
                            sizeof(nv__dist_params));
  if (n) {
    nv__dist_params *p = n->params;
    p->group = g;
    p->peer = peer;
    p->file = here_file;
    p->line = here_line;
  }
  return nv__op_finish(nv__prims[prim].name, n);
}

/* Checks x and g for op; *g resolved. NULL to go on, else the failed array. */
static nv_array *check(const char *op, const nv_array *x, nv_group *g, nv__group_info *info) {
  if (x) {
    nv_array *f = nv__op_check(op, &x, 1);
    if (f) return f;
  }
  *g = nv__group_resolve(*g);
  if (nv__group_info_get(*g, op, info) != NV_OK) {
    char at[300];
    place(at, sizeof at, op, here_file, here_line);
    return nv__array_error(nv__last_status(), "%s%s", nv_last_error(), at);
  }
  return NULL;
}

static nv_array *reduce(int prim, const nv_array *x, nv_group g) {
  begin();
  const char *op = nv__prims[prim].name;
  nv__group_info info;
  nv_array *f = check(op, x, &g, &info);
  if (f) return f;
  if (info.size == 1) return same(x);
  const nv__output *o = nv__out(x);
  return node(prim, x, o->dtype, o->shape, o->ndim, g, 0);
}

nv_array *nv_dist_all_sum(const nv_array *x, nv_group g) { return reduce(NV__PRIM_ALL_SUM, x, g); }
nv_array *nv_dist_all_max(const nv_array *x, nv_group g) { return reduce(NV__PRIM_ALL_MAX, x, g); }
nv_array *nv_dist_all_min(const nv_array *x, nv_group g) { return reduce(NV__PRIM_ALL_MIN, x, g); }

nv_array *nv_dist_all_gather(const nv_array *x, nv_group g) {
  begin();
  nv__group_info info;
  nv_array *f = check("all_gather", x, &g, &info);
  if (f) return f;
  if (info.size == 1) return same(x);
  const nv__output *o = nv__out(x);
  int shape[NV__MAX_DIMS], nd = o->ndim ? o->ndim : 1;
  if (o->ndim) memcpy(shape, o->shape, (size_t)o->ndim * sizeof(int));
  else shape[0] = 1;
  if ((int64_t)shape[0] * info.size > INT32_MAX)
    return op_error(NV_ERR_INVALID_ARGUMENT, "all_gather",
                        "the first axis (%d) times the group size (%d) is too large", shape[0],
                        info.size);
  shape[0] *= info.size;
  return node(NV__PRIM_ALL_GATHER, x, o->dtype, shape, nd, g, 0);
}

nv_array *nv_dist_sum_scatter(const nv_array *x, nv_group g) {
  begin();
  nv__group_info info;
  nv_array *f = check("sum_scatter", x, &g, &info);
  if (f) return f;
  if (info.size == 1) return same(x);
  const nv__output *o = nv__out(x);
  if (o->ndim == 0 || o->shape[0] % info.size) {
    char s[NV__SHAPE_BUF];
    return op_error(NV_ERR_INVALID_ARGUMENT, "sum_scatter",
                        "shape %s is invalid for a group of size %d: the first axis must exist "
                        "and be divisible by the group size",
                        nv__shape_str(o->shape, o->ndim, s, sizeof s), info.size);
  }
  int shape[NV__MAX_DIMS];
  memcpy(shape, o->shape, (size_t)o->ndim * sizeof(int));
  shape[0] /= info.size;
  return node(NV__PRIM_SUM_SCATTER, x, o->dtype, shape, o->ndim, g, 0);
}

/* D24: the peer must be another rank of a group of size >= 2. */
static nv_array *check_peer(const char *op, int peer, const nv__group_info *info) {
  if (info->size > 1 && peer >= 0 && peer < info->size && peer != info->rank) return NULL;
  return op_error(NV_ERR_INVALID_ARGUMENT, op, "rank %d is not another rank of a group of %d",
                      peer, info->size);
}

/* The bytes the header needs for a dtype name and ndim dimensions. */
static size_t header_need(nv_dtype dt, int ndim) {
  return 8 + 8 + 8 + strlen(nv_dtype_name(dt)) + 8 + 8 * (size_t)ndim;
}

nv_array *nv_dist_send(const nv_array *x, int dst, nv_group g) {
  begin();
  nv__group_info info;
  nv_array *f = check("send", x, &g, &info);
  if (f) return f;
  if ((f = check_peer("send", dst, &info))) return f;
  const nv__output *o = nv__out(x);
  if (header_need(o->dtype, o->ndim) > HEADER_BYTES)
    return op_error(NV_ERR_INVALID_ARGUMENT, "send",
                        "%d dimensions do not fit the array header", o->ndim);
  return node(NV__PRIM_SEND, x, o->dtype, o->shape, o->ndim, g, dst);
}

nv_array *nv_dist_recv(const int *shape, int ndim, nv_dtype dtype, int src, nv_group g) {
  begin();
  nv__group_info info;
  nv_array *f = check("recv", NULL, &g, &info);
  if (f) return f;
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return op_error(NV_ERR_INVALID_ARGUMENT, "recv", "invalid dtype %d", (int)dtype);
  if (ndim < 0 || ndim > NV__MAX_DIMS || (ndim > 0 && !shape))
    return op_error(NV_ERR_INVALID_ARGUMENT, "recv", "invalid shape (%d dimensions)", ndim);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return op_error(NV_ERR_INVALID_ARGUMENT, "recv", "negative dimension %d in the shape",
                          shape[i]);
  if ((f = check_peer("recv", src, &info))) return f;
  if (header_need(dtype, ndim) > HEADER_BYTES)
    return op_error(NV_ERR_INVALID_ARGUMENT, "recv",
                        "%d dimensions do not fit the array header", ndim);
  return node(NV__PRIM_RECV, NULL, dtype, shape, ndim, g, src);
}

nv_array *nv_dist_recv_like(const nv_array *x, int src, nv_group g) {
  begin();
  nv_array *f = nv__op_check("recv_like", &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  nv_dist_set_caller(here_file, here_line); /* the recv's caller is recv_like's */
  return nv_dist_recv(o->shape, o->ndim, o->dtype, src, g);
}

nv_array *nv_dist_sum_gradients(const nv_array *x, nv_group g) {
  begin();
  nv__group_info info;
  nv_array *f = check("sum_gradients", x, &g, &info);
  if (f) return f;
  if (info.size == 1) return same(x);
  const nv__output *o = nv__out(x);
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(NV__PRIM_SUM_GRADIENTS, in, 1, o->dtype, o->shape, o->ndim,
                            sizeof(nv__dist_params));
  if (n) {
    nv__output_set_strides(&n->out[0], o->strides); /* output 0 is input 0's data */
    nv__dist_params *p = n->params;
    p->group = g;
    p->file = here_file;
    p->line = here_line;
  }
  return nv__op_finish("sum_gradients", n);
}

/* ---- One collective's run ---- */

void nv__dist_job_of(const nv__node *n, nv__dist_job *j) {
  const nv__dist_params *p = n->params;
  memset(j, 0, sizeof *j);
  j->prim = n->prim;
  j->group = p->group;
  j->peer = p->peer;
  j->file = p->file;
  j->line = p->line;
  j->dtype = n->out[0].dtype;
  j->out_count = n->out[0].size;
  const nv__output *shaped = &n->out[0];
  if (n->ninputs) {
    const nv__output *in = &n->inputs[0].node->out[n->inputs[0].idx];
    j->in_count = in->size;
    shaped = in;
  }
  j->ndim = shaped->ndim;
  memcpy(j->shape, shaped->shape, (size_t)shaped->ndim * sizeof(int));
}

static bool half(nv_dtype t) { return t == NV_DTYPE_FLOAT16 || t == NV_DTYPE_BFLOAT16; }

static void widen(float *d, const uint16_t *s, size_t n, nv_dtype t) {
  if (t == NV_DTYPE_FLOAT16)
    for (size_t i = 0; i < n; i++) d[i] = nv__f16_to_f32(s[i]);
  else
    for (size_t i = 0; i < n; i++) d[i] = nv__bf16_to_f32(s[i]);
}

static void narrow(uint16_t *d, const float *s, size_t n, nv_dtype t) {
  if (t == NV_DTYPE_FLOAT16)
    for (size_t i = 0; i < n; i++) d[i] = nv__f32_to_f16(s[i]);
  else
    for (size_t i = 0; i < n; i++) d[i] = nv__f32_to_bf16(s[i]);
}

typedef struct run_ctx {
  const nv__dist_job *j;
  const void *in;
  void *out;
} run_ctx;

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* D25's header of (dtype, shape, payload bytes). */
static void header_write(unsigned char *h, nv_dtype dt, const int *shape, int ndim,
                         uint64_t bytes) {
  memset(h, 0, HEADER_BYTES);
  memcpy(h, "nuvecsnd", 8);
  put_u64(h + 8, bytes);
  const char *name = nv_dtype_name(dt);
  size_t len = strlen(name), at = 24 + len;
  put_u64(h + 16, len);
  memcpy(h + 24, name, len);
  put_u64(h + at, (uint64_t)ndim);
  for (int i = 0; i < ndim; i++) put_u64(h + at + 8 + 8 * (size_t)i, (uint64_t)shape[i]);
}

static nv_status do_reduce(nv__comm *c, const run_ctx *r, int op) {
  const nv__dist_job *j = r->j;
  size_t n = (size_t)j->in_count;
  if (half(j->dtype)) {
    float *w = nv__malloc(n ? n * sizeof(float) : 1);
    if (!w) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", n * 4);
    widen(w, r->in, n, j->dtype);
    nv_status st = c->ops->all_reduce(c, w, w, n, NV_DTYPE_FLOAT32, op);
    if (st == NV_OK) narrow(r->out, w, n, j->dtype);
    nv__free(w);
    return st;
  }
  return c->ops->all_reduce(c, r->in, r->out, n, j->dtype, op);
}

static nv_status do_sum_scatter(nv__comm *c, const run_ctx *r) {
  const nv__dist_job *j = r->j;
  size_t n = (size_t)j->in_count, m = (size_t)j->out_count;
  if (!half(j->dtype)) return c->ops->sum_scatter(c, r->in, r->out, m, j->dtype);
  float *w = nv__malloc((n + m) * sizeof(float) + 1);
  if (!w) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", (n + m) * 4);
  widen(w, r->in, n, j->dtype);
  nv_status st = c->ops->sum_scatter(c, w, w + n, m, NV_DTYPE_FLOAT32);
  if (st == NV_OK) narrow(r->out, w + n, m, j->dtype);
  nv__free(w);
  return st;
}

static nv_status do_send(nv__comm *c, const run_ctx *r) {
  const nv__dist_job *j = r->j;
  size_t bytes = (size_t)j->in_count * nv_dtype_size(j->dtype);
  unsigned char h[HEADER_BYTES];
  header_write(h, j->dtype, j->shape, j->ndim, bytes);
  nv_status st = c->ops->send(c, h, HEADER_BYTES, j->peer);
  if (st == NV_OK && bytes) st = c->ops->send(c, r->in, bytes, j->peer);
  if (st == NV_OK && r->out != r->in) memcpy(r->out, r->in, bytes);
  return st;
}

static nv_status do_recv(nv__comm *c, const run_ctx *r) {
  const nv__dist_job *j = r->j;
  size_t bytes = (size_t)j->out_count * nv_dtype_size(j->dtype);
  unsigned char h[HEADER_BYTES], want[HEADER_BYTES];
  nv_status st = c->ops->recv(c, h, HEADER_BYTES, j->peer);
  if (st != NV_OK) return st;
  if (memcmp(h, "nuvecsnd", 8))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "rank %d sent no array header", j->peer);
  header_write(want, j->dtype, j->shape, j->ndim, bytes);
  if (memcmp(h, want, HEADER_BYTES)) {
    /* Another dtype or shape: drain what the sender declared so the connection stays aligned,
     * then say what it sent, when the header is well-formed enough to tell. */
    uint64_t left = get_u64(h + 8);
    char *sink = nv__malloc(DRAIN_CHUNK);
    if (!sink) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory draining a message");
    while (left && st == NV_OK) {
      size_t k = left < DRAIN_CHUNK ? (size_t)left : DRAIN_CHUNK;
      st = c->ops->recv(c, sink, k, j->peer);
      left -= k;
    }
    nv__free(sink);
    if (st != NV_OK) return st;
    char got[160] = "an unreadable header", ws[NV__SHAPE_BUF];
    uint64_t len = get_u64(h + 16);
    if (len < 16 && 24 + len + 8 <= HEADER_BYTES) {
      uint64_t nd = get_u64(h + 24 + len);
      if (nd <= NV__MAX_DIMS && 32 + len + 8 * nd <= HEADER_BYTES) {
        int dims[NV__MAX_DIMS];
        bool fit = true;
        for (uint64_t i = 0; i < nd; i++) {
          uint64_t d = get_u64(h + 32 + len + 8 * i);
          fit &= d <= INT32_MAX;
          dims[i] = (int)d;
        }
        char gs[NV__SHAPE_BUF];
        if (fit)
          snprintf(got, sizeof got, "%.*s %s", (int)len, (const char *)h + 24,
                   nv__shape_str(dims, (int)nd, gs, sizeof gs));
      }
    }
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "rank %d sent another dtype or shape than %s %s (it sent %s)", j->peer,
                         nv_dtype_name(j->dtype), nv__shape_str(j->shape, j->ndim, ws, sizeof ws),
                         got);
  }
  return bytes ? c->ops->recv(c, r->out, bytes, j->peer) : NV_OK;
}

static nv_status run_on(nv__comm *c, void *user) {
  const run_ctx *r = user;
  switch (r->j->prim) {
    case NV__PRIM_ALL_SUM: return do_reduce(c, r, NV__RED_SUM);
    case NV__PRIM_ALL_MAX: return do_reduce(c, r, NV__RED_MAX);
    case NV__PRIM_ALL_MIN: return do_reduce(c, r, NV__RED_MIN);
    case NV__PRIM_ALL_GATHER:
      return c->ops->all_gather(c, r->in, r->out,
                                (size_t)r->j->in_count * nv_dtype_size(r->j->dtype));
    case NV__PRIM_SUM_SCATTER: return do_sum_scatter(c, r);
    case NV__PRIM_SEND: return do_send(c, r);
    default: return do_recv(c, r);
  }
}

/* A failed run's error, with the place its builder was called from. */
static nv_status located(const nv__dist_job *j, nv_status st) {
  if (st == NV_OK || !j->file) return st;
  char msg[1024], at[300];
  snprintf(msg, sizeof msg, "%s", nv_last_error());
  place(at, sizeof at, nv__prims[j->prim].name, j->file, j->line);
  return nv__set_error(st, "%s%s", msg, at);
}

nv_status nv__dist_run(const nv__dist_job *j, const void *in, void *out) {
  run_ctx r = {j, in, out};
  return located(j, nv__group_run(j->group, nv__prims[j->prim].name, run_on, &r));
}

nv_status nv__dist_run_reserved(const nv__dist_job *j, uint64_t ticket, const void *in,
                                void *out) {
  run_ctx r = {j, in, out};
  return located(j, nv__group_run_reserved(j->group, ticket, nv__prims[j->prim].name, run_on,
                                           &r));
}

/* ---- CPU kernels ---- */

/* D30/D31: a row-contiguous input is read where it is, any other layout is gathered first; the
 * output is allocated unless donated (then the reduction or send runs in place). The
 * evaluation's open GPU work is submitted first: GPU-stream collectives recorded in it before
 * this one take their place in the group's order when submitted, so this one comes after them
 * (program order across streams; it waits for them to run). */
static nv_status k_collective(nv__node *n, const nv__operand *in, int donated) {
  nv__ectx_commit(nv__cpu_encoding_ctx());
  nv__dist_job j;
  nv__dist_job_of(n, &j);
  const void *src = NULL;
  void *tmp = NULL;
  if (n->ninputs) {
    const nv__output *m = in[0].meta;
    size_t isz = nv_dtype_size(m->dtype);
    if (m->flags & NV__FLAG_ROW || m->size <= 1) {
      src = nv__operand_ptr(&in[0]);
    } else {
      tmp = nv__malloc((size_t)m->size * isz);
      if (!tmp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[n->prim].name);
      nv__copy_strided(tmp, nv__operand_ptr(&in[0]), m->shape, m->strides, m->ndim, isz);
      src = tmp;
    }
  }
  nv_status st = donated >= 0 ? NV_OK : nv__output_alloc(&n->out[0]);
  if (st == NV_OK) st = nv__dist_run(&j, src, nv__output_ptr(&n->out[0]));
  nv__free(tmp);
  return st;
}

static nv_status k_share(nv__node *n, const nv__operand *in, int donated) {
  (void)donated;
  n->out[0].buf = nv__buffer_retain(in[0].buf);
  n->out[0].offset = in[0].offset;
  return NV_OK;
}

void nv__cpu_register_distributed(nv__kernel_fn *k);
void nv__cpu_register_distributed(nv__kernel_fn *k) {
  k[NV__PRIM_ALL_SUM] = k_collective;
  k[NV__PRIM_ALL_MAX] = k_collective;
  k[NV__PRIM_ALL_MIN] = k_collective;
  k[NV__PRIM_ALL_GATHER] = k_collective;
  k[NV__PRIM_SUM_SCATTER] = k_collective;
  k[NV__PRIM_SEND] = k_collective;
  k[NV__PRIM_RECV] = k_collective;
  k[NV__PRIM_SUM_GRADIENTS] = k_share;
}
