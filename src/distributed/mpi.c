/* The MPI backend (DESIGN §10): OpenMPI's libmpi loaded at run time (dlopen), so that builds
 * and machines without it still work; without it init("mpi") fails with "MPI not found". The
 * process counts as started by MPI when the launcher's environment is there
 * (OMPI_COMM_WORLD_SIZE, or PMIX_RANK/PMI_RANK). OpenMPI's handles are the addresses of its
 * predefined objects (MPI_COMM_WORLD is &ompi_mpi_comm_world, MPI_FLOAT &ompi_mpi_float, ...),
 * looked up by name. Errors return (MPI_ERRORS_RETURN) and become NV_ERR_BACKEND with MPI's
 * message; OpenMPI has no fault tolerance, so a lost rank ends the job through the launcher,
 * and health() reports OK (it cannot tell). Where MPI's semantics differ from the ring's,
 * this file adapts: float and complex max/min (MPI drops NaNs, has no complex order) are an
 * all_gather reduced in rank order; 8- and 16-bit integer reductions run widened to 32 bits
 * (OpenMPI's vectorized sums of them saturate); counts past INT_MAX go in pieces; recv reads
 * MPI's messages as a byte stream (a larger message's rest is kept for the next recv). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/dist_internal.h"

typedef void *MPI_Comm;
typedef void *MPI_Datatype;
typedef void *MPI_Op;

static struct mpi_api {
  void *lib;
  int (*Init_thread)(int *, char ***, int, int *);
  int (*Initialized)(int *);
  int (*Finalized)(int *);
  int (*Finalize)(void);
  int (*Comm_rank)(MPI_Comm, int *);
  int (*Comm_size)(MPI_Comm, int *);
  int (*Comm_split)(MPI_Comm, int, int, MPI_Comm *);
  int (*Comm_free)(MPI_Comm *);
  int (*Comm_set_errhandler)(MPI_Comm, void *);
  int (*Allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
  int (*Allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
  int (*Reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
  int (*Send)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
  int (*Recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, void *);
  int (*Probe)(int, int, MPI_Comm, void *);
  int (*Get_count)(const void *, MPI_Datatype, int *);
  int (*Error_string)(int, char *, int *);
  MPI_Comm world;
  void *errors_return;
  MPI_Datatype byte, types[NV_DTYPE_COUNT];
  MPI_Op sum, max, min, lor, land;
  const char *error; /* why it did not load */
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

#define MPI_IN_PLACE_OMPI ((void *)1) /* OpenMPI's MPI_IN_PLACE */
#define MPI_THREAD_MULTIPLE_OMPI 3

static void *sym(const char *name) { return api.lib ? dlsym(api.lib, name) : NULL; }

static void load(void) {
  const char *names[] = {"libmpi.so.40", "libmpi.so"};
  for (size_t i = 0; i < sizeof names / sizeof *names && !api.lib; i++)
    api.lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
  if (!api.lib) {
    api.error = "MPI not found (libmpi.so.40 of OpenMPI could not be loaded; install "
                "libopenmpi-dev, or tools/setup.sh --mpi)";
    return;
  }
#define LOAD(f) (*(void **)&api.f = sym("MPI_" #f))
  bool ok = LOAD(Init_thread) && LOAD(Initialized) && LOAD(Finalized) && LOAD(Finalize) &&
            LOAD(Comm_rank) && LOAD(Comm_size) && LOAD(Comm_split) && LOAD(Comm_free) &&
            LOAD(Comm_set_errhandler) && LOAD(Allreduce) && LOAD(Allgather) &&
            LOAD(Reduce_scatter_block) && LOAD(Send) && LOAD(Recv) && LOAD(Probe) && LOAD(Get_count) &&
            LOAD(Error_string);
#undef LOAD
  api.world = sym("ompi_mpi_comm_world");
  api.errors_return = sym("ompi_mpi_errors_return");
  api.byte = sym("ompi_mpi_byte");
  const char *tnames[NV_DTYPE_COUNT] = {
      [NV_DTYPE_BOOL] = "ompi_mpi_uint8_t",    [NV_DTYPE_UINT8] = "ompi_mpi_uint8_t",
      [NV_DTYPE_UINT16] = "ompi_mpi_uint16_t", [NV_DTYPE_UINT32] = "ompi_mpi_uint32_t",
      [NV_DTYPE_UINT64] = "ompi_mpi_uint64_t", [NV_DTYPE_INT8] = "ompi_mpi_int8_t",
      [NV_DTYPE_INT16] = "ompi_mpi_int16_t",   [NV_DTYPE_INT32] = "ompi_mpi_int32_t",
      [NV_DTYPE_INT64] = "ompi_mpi_int64_t",   [NV_DTYPE_FLOAT32] = "ompi_mpi_float",
      [NV_DTYPE_FLOAT64] = "ompi_mpi_double",  [NV_DTYPE_COMPLEX64] = "ompi_mpi_c_float_complex"};
  for (int t = 0; t < NV_DTYPE_COUNT; t++)
    if (tnames[t] && !(api.types[t] = sym(tnames[t]))) ok = false;
  api.sum = sym("ompi_mpi_op_sum");
  api.max = sym("ompi_mpi_op_max");
  api.min = sym("ompi_mpi_op_min");
  api.lor = sym("ompi_mpi_op_lor");
  api.land = sym("ompi_mpi_op_land");
  if (!ok || !api.world || !api.errors_return || !api.byte || !api.sum || !api.max || !api.min ||
      !api.lor || !api.land) {
    api.error = "MPI not found (the libmpi loaded is not OpenMPI's: its symbols are missing)";
    dlclose(api.lib);
    api.lib = NULL;
  }
}

bool nv__mpi_available(void) {
  pthread_once(&load_once, load);
  return api.lib != NULL;
}

static nv_status mpi_error(int code, const char *what) {
  char msg[512];
  int len = 0;
  if (api.Error_string(code, msg, &len) != 0) len = 0;
  msg[len < (int)sizeof msg ? len : (int)sizeof msg - 1] = 0;
  return nv__set_error(NV_ERR_BACKEND, "MPI_%s failed: %s", what, len ? msg : "unknown error");
}

/* Bytes of a message received past what a recv asked for, kept for the next recv from that
 * rank: MPI delivers messages, while the collectives read a byte stream (a header, then the
 * payload, or a mismatched payload drained in pieces). */
typedef struct carry {
  char *buf;
  size_t len, at;
} carry;

typedef struct mpi_comm {
  nv__comm base;
  MPI_Comm comm;
  bool owned;    /* from Comm_split (freed), not the world */
  carry *carry;  /* per source rank */
} mpi_comm;

#define MC(c) (((mpi_comm *)(c))->comm)
#define PIECE ((size_t)1 << 30) /* elements per call (MPI counts are int) */

static MPI_Op op_of(nv_dtype t, int op) {
  if (t == NV_DTYPE_BOOL) return op == NV__RED_MIN ? api.land : api.lor;
  return op == NV__RED_SUM ? api.sum : op == NV__RED_MAX ? api.max : api.min;
}

static nv_status mpi_all_gather(nv__comm *c, const void *in, void *out, size_t n);

/* 8- and 16-bit integers widened to 32 bits (sign-extended for signed types): OpenMPI 4.1's
 * vectorized sums of them saturate instead of wrapping. The narrowed 32-bit sum is the
 * wrapped sum. */
static nv_status widened(nv__comm *c, const void *in, void *buf, size_t count, nv_dtype dtype,
                         int op) {
  bool sgn = dtype == NV_DTYPE_INT8 || dtype == NV_DTYPE_INT16;
  size_t isz = nv_dtype_size(dtype);
  int32_t *w = nv__malloc(count * 4 + 4);
  if (!w) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < count; i++) {
    const char *p = (const char *)in + i * isz;
    w[i] = isz == 1 ? (sgn ? *(const int8_t *)p : *(const uint8_t *)p)
                    : (sgn ? *(const int16_t *)p : *(const uint16_t *)p);
  }
  nv_status st = NV_OK;
  for (size_t at = 0; at < count && st == NV_OK; at += PIECE) {
    size_t k = count - at < PIECE ? count - at : PIECE;
    int e = api.Allreduce(MPI_IN_PLACE_OMPI, w + at, (int)k, api.types[NV_DTYPE_INT32],
                          op_of(NV_DTYPE_INT32, op), MC(c));
    if (e) st = mpi_error(e, "Allreduce");
  }
  for (size_t i = 0; st == NV_OK && i < count; i++) {
    char *p = (char *)buf + i * isz;
    if (isz == 1) *(uint8_t *)p = (uint8_t)(uint32_t)w[i];
    else *(uint16_t *)p = (uint16_t)(uint32_t)w[i];
  }
  nv__free(w);
  return st;
}

static nv_status mpi_all_reduce(nv__comm *c, const void *in, void *buf, size_t count,
                                nv_dtype dtype, int op) {
  size_t isz = nv_dtype_size(dtype);
  if (dtype != NV_DTYPE_BOOL && (isz == 1 || isz == 2)) return widened(c, in, buf, count, dtype, op);
  bool inexact = dtype == NV_DTYPE_FLOAT32 || dtype == NV_DTYPE_FLOAT64 || dtype == NV_DTYPE_COMPLEX64;
  if (inexact && op != NV__RED_SUM) {
    /* MPI has no order on complex numbers, and its float max/min drop NaNs: gather
     * everyone's, reduce in rank order (NaN propagating, the same bits on every rank). */
    size_t bytes = count * isz;
    char *all = nv__malloc(bytes * (size_t)c->size + 1);
    if (!all) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    nv_status st = mpi_all_gather(c, in, all, bytes);
    if (st == NV_OK) {
      memcpy(buf, all, bytes);
      for (int r = 1; r < c->size; r++) nv__dist_reduce(buf, all + (size_t)r * bytes, count, dtype, op);
    }
    nv__free(all);
    return st;
  }
  for (size_t at = 0; at < count; at += PIECE) {
    size_t k = count - at < PIECE ? count - at : PIECE;
    /* Out of place where it can be: MPI reads `in` itself instead of a copy of it. */
    const void *from = in == buf ? MPI_IN_PLACE_OMPI : (const char *)in + at * isz;
    int e = api.Allreduce(from, (char *)buf + at * isz, (int)k, api.types[dtype],
                          op_of(dtype, op), MC(c));
    if (e) return mpi_error(e, "Allreduce");
  }
  return NV_OK;
}

static nv_status mpi_all_gather(nv__comm *c, const void *in, void *out, size_t n) {
  if (n <= (size_t)INT_MAX) {
    int e = api.Allgather(in, (int)n, api.byte, out, (int)n, api.byte, MC(c));
    return e ? mpi_error(e, "Allgather") : NV_OK;
  }
  /* Past INT_MAX bytes per rank: gather pieces into a staging area, then place them. */
  size_t piece = (size_t)INT_MAX / 2;
  char *stage = nv__malloc(piece * (size_t)c->size);
  if (!stage) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  nv_status st = NV_OK;
  for (size_t at = 0; at < n && st == NV_OK; at += piece) {
    size_t k = n - at < piece ? n - at : piece;
    int e = api.Allgather((const char *)in + at, (int)k, api.byte, stage, (int)k, api.byte, MC(c));
    if (e) st = mpi_error(e, "Allgather");
    for (int r = 0; st == NV_OK && r < c->size; r++)
      memcpy((char *)out + (size_t)r * n + at, stage + (size_t)r * k, k);
  }
  nv__free(stage);
  return st;
}

static nv_status mpi_sum_scatter(nv__comm *c, const void *in, void *out, size_t count,
                                 nv_dtype dtype) {
  size_t isz = nv_dtype_size(dtype);
  if (count > (size_t)INT_MAX || (dtype != NV_DTYPE_BOOL && isz <= 2)) return nv__comm_sum_scatter_by_reduce(c, in, out, count, dtype);
  int e = api.Reduce_scatter_block(in, out, (int)count, api.types[dtype],
                                   op_of(dtype, NV__RED_SUM), MC(c));
  return e ? mpi_error(e, "Reduce_scatter_block") : NV_OK;
}

static nv_status mpi_send(nv__comm *c, const void *buf, size_t n, int dst) {
  for (size_t at = 0; at < n || at == 0; at += PIECE) {
    size_t k = n - at < PIECE ? n - at : PIECE;
    int e = api.Send((const char *)buf + at, (int)k, api.byte, dst, 0, MC(c));
    if (e) return mpi_error(e, "Send");
    if (n == 0) break;
  }
  return NV_OK;
}

/* Receives n bytes of src's stream: what a previous message left over, then whole messages
 * (probed first: one larger than what is still wanted is received whole and its rest kept). */
static nv_status mpi_recv(nv__comm *c, void *buf, size_t n, int src) {
  carry *cy = &((mpi_comm *)c)->carry[src];
  char *out = buf;
  bool got_any = false;
  while (n > 0 || !got_any) {
    got_any = true;
    if (cy->at < cy->len) {
      size_t k = cy->len - cy->at < n ? cy->len - cy->at : n;
      memcpy(out, cy->buf + cy->at, k);
      cy->at += k;
      out += k;
      n -= k;
      if (cy->at == cy->len) {
        nv__free(cy->buf);
        *cy = (carry){0};
      }
      continue;
    }
    uint64_t status[8]; /* MPI_Status (OpenMPI's is 24 bytes) */
    int count = 0;
    int e = api.Probe(src, 0, MC(c), status);
    if (!e) e = api.Get_count(status, api.byte, &count);
    if (e) return mpi_error(e, "Probe");
    size_t k = (size_t)count;
    if (k <= n) {
      e = api.Recv(out, count, api.byte, src, 0, MC(c), NULL);
      if (e) return mpi_error(e, "Recv");
      out += k;
      n -= k;
      if (k == 0 && n == 0) break;
      continue;
    }
    char *whole = nv__malloc(k);
    if (!whole) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", k);
    e = api.Recv(whole, count, api.byte, src, 0, MC(c), NULL);
    if (e) {
      nv__free(whole);
      return mpi_error(e, "Recv");
    }
    memcpy(out, whole, n);
    *cy = (carry){whole, k, n};
    n = 0;
  }
  return NV_OK;
}

static nv_status mpi_health(nv__comm *c) {
  (void)c;
  return NV_OK; /* OpenMPI cannot tell; the launcher ends the job when a rank is lost */
}

static void mpi_destroy(nv__comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  for (int i = 0; i < c->size; i++) nv__free(m->carry[i].buf);
  nv__free(m->carry);
  if (m->owned) api.Comm_free(&m->comm);
  nv__free(m);
}

static nv_status mpi_split(nv__comm *c, int color, int key, nv__comm **out);

static const nv__comm_ops mpi_ops = {mpi_all_reduce, mpi_all_gather, mpi_sum_scatter,
                                     mpi_send,       mpi_recv,       mpi_split,
                                     mpi_health,     mpi_destroy};

static nv__comm *wrap(MPI_Comm comm, bool owned) {
  int rank = 0, size = 0;
  if (api.Comm_rank(comm, &rank) || api.Comm_size(comm, &size)) return NULL;
  mpi_comm *m = nv__calloc(1, sizeof *m);
  carry *cy = m ? nv__calloc((size_t)size, sizeof *cy) : NULL;
  if (!cy) {
    nv__free(m);
    return NULL;
  }
  m->carry = cy;
  m->base = (nv__comm){&mpi_ops, "mpi", rank, size};
  m->comm = comm;
  m->owned = owned;
  return &m->base;
}

static nv_status mpi_split(nv__comm *c, int color, int key, nv__comm **out) {
  MPI_Comm nc = NULL;
  int e = api.Comm_split(MC(c), color, key < 0 ? c->rank : key, &nc);
  if (e) return mpi_error(e, "Comm_split");
  api.Comm_set_errhandler(nc, api.errors_return);
  *out = wrap(nc, true);
  if (!*out) {
    api.Comm_free(&nc);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  }
  return NV_OK;
}

static void finalize(void) {
  int done = 0;
  if (api.Finalized(&done) == 0 && !done) api.Finalize();
}

nv_status nv__mpi_init(nv__comm **out) {
  *out = NULL;
  bool launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
  if (!nv__mpi_available()) return nv__set_error(NV_ERR_UNSUPPORTED, "init: %s", api.error);
  if (!launched) return NV_OK;
  int inited = 0, provided = 0;
  api.Initialized(&inited);
  if (!inited) {
    int e = api.Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE_OMPI, &provided);
    if (e) return mpi_error(e, "Init_thread");
    atexit(finalize);
  }
  api.Comm_set_errhandler(api.world, api.errors_return);
  *out = wrap(api.world, false);
  return *out ? NV_OK : nv__set_error(NV_ERR_BACKEND, "init: MPI_Comm_rank/size failed");
}
