/* Device-side index checks (gpu.h): records in mapped host memory that kernels raise on an
 * out-of-range index, and how a finished submission turns a raised one into its failure.
 *
 * A device keeps pages of NV__CHECK_PAGE records (one hrx host-visible buffer each, mapped once
 * for the host, its GPU address passed to kernels). A recording takes a zeroed record per
 * checked node; its commit hands the records to the submission, which reads them when it is
 * seen finished and frees them then (no GPU work can write a record after its submission has
 * finished, so a freed one is safe to zero and hand out again). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

#define NV__CHECK_PAGE 1024

struct nv__gpu_check_page {
  hrx_buffer *hb;
  nv__gpu_bad *host;
  uint64_t gpu;
};

static nv__gpu_bad *record_host(nv__gpu_dev *d, uint32_t slot) {
  return &d->check_pages[slot / NV__CHECK_PAGE].host[slot % NV__CHECK_PAGE];
}

/* A free slot (under d->check_lock), adding a page when none is left. */
static nv_status slot_get_locked(nv__gpu_dev *d, uint32_t *out) {
  if (!d->ncheck_free) {
    if (d->ncheck_pages >= UINT32_MAX / NV__CHECK_PAGE - 1)
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "too many index checks in flight");
    struct nv__gpu_check_page *pages =
        realloc(d->check_pages, (d->ncheck_pages + 1) * sizeof *pages);
    if (!pages) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory for index checks");
    d->check_pages = pages;
    size_t need = d->ccheck_free + NV__CHECK_PAGE;
    uint32_t *fr = realloc(d->check_free, need * sizeof *fr);
    if (!fr) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory for index checks");
    d->check_free = fr;
    d->ccheck_free = need;
    struct nv__gpu_check_page pg = {0};
    size_t bytes = NV__CHECK_PAGE * sizeof(nv__gpu_bad);
    hrx_status hs = hrx_buffer_create(d->rt, HRX_MEMORY_HOST_VISIBLE, bytes, &pg.hb);
    void *host = NULL;
    if (hs == HRX_OK) hs = hrx_buffer_map(pg.hb, HRX_ACCESS_READ | HRX_ACCESS_WRITE, &host);
    if (hs == HRX_OK) hs = hrx_buffer_gpu_address(pg.hb, &pg.gpu);
    if (hs != HRX_OK) {
      hrx_buffer_release(pg.hb);
      return nv__gpu_hrx_error(hs, "allocating index-check records");
    }
    pg.host = host;
    memset(pg.host, 0, bytes);
    uint32_t base = (uint32_t)(d->ncheck_pages * NV__CHECK_PAGE);
    d->check_pages[d->ncheck_pages++] = pg;
    for (uint32_t i = NV__CHECK_PAGE; i-- > 0;) d->check_free[d->ncheck_free++] = base + i;
  }
  *out = d->check_free[--d->ncheck_free];
  return NV_OK;
}

nv_status nv__gpu_index_check(nv__gpu_ctx *ctx, const char *op, nv__gpu_bad **out) {
  nv__gpu_dev *d = ctx->dev;
  if (ctx->nchecks == ctx->cchecks) {
    size_t nc = ctx->cchecks ? ctx->cchecks * 2 : 8;
    nv__gpu_check *p = realloc(ctx->checks, nc * sizeof *p);
    if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    ctx->checks = p;
    ctx->cchecks = nc;
  }
  pthread_mutex_lock(&d->check_lock);
  uint32_t slot = 0;
  nv_status st = slot_get_locked(d, &slot);
  pthread_mutex_unlock(&d->check_lock);
  if (st != NV_OK) return st;
  memset(record_host(d, slot), 0, sizeof(nv__gpu_bad));
  ctx->checks[ctx->nchecks++] = (nv__gpu_check){slot, op};
  struct nv__gpu_check_page *pg = &d->check_pages[slot / NV__CHECK_PAGE];
  *out = (nv__gpu_bad *)(uintptr_t)(pg->gpu + (slot % NV__CHECK_PAGE) * sizeof(nv__gpu_bad));
  return NV_OK;
}

void nv__gpu_checks_drop(nv__gpu_dev *d, nv__gpu_check *checks, size_t n) {
  if (!n) return;
  pthread_mutex_lock(&d->check_lock);
  for (size_t i = 0; i < n; i++) d->check_free[d->ncheck_free++] = checks[i].slot;
  pthread_mutex_unlock(&d->check_lock);
}

/* Reads records (under s->lock): the first raised one is the submission's failure, unless it
 * failed already. Frees their slots. */
static void resolve_list(nv__gpu_sub *s, nv__gpu_dev *d, const nv__gpu_check *c, size_t n) {
  for (size_t i = 0; i < n && s->status == NV_OK; i++) {
    const volatile nv__gpu_bad *r = record_host(d, c[i].slot);
    if (!r->raised) continue;
    s->status = NV_ERR_INVALID_ARGUMENT;
    if (r->kind == NV__GPU_BAD_MASK_ROWS)
      snprintf(s->msg, sizeof s->msg, "%s: the mask selects more than the %lld rows of src",
               c[i].op, (long long)r->size);
    else
      snprintf(s->msg, sizeof s->msg, "%s: index %lld is out of range for an axis of size %lld",
               c[i].op, (long long)r->value, (long long)r->size);
  }
  nv__gpu_checks_drop(d, (nv__gpu_check *)c, n);
}

void nv__gpu_checks_submit(nv__gpu_ctx *ctx, nv__gpu_sub *s) {
  if (!ctx->nchecks) return;
  if (s && (!s->done || s->status == NV_OK)) {
    nv__gpu_check *c = malloc(ctx->nchecks * sizeof *c);
    if (c) {
      memcpy(c, ctx->checks, ctx->nchecks * sizeof *c);
      pthread_mutex_lock(&s->lock);
      s->dev = ctx->dev;
      s->checks = c;
      s->nchecks = ctx->nchecks;
      if (s->done) nv__gpu_checks_resolve(s); /* finished already (seen by another thread) */
      pthread_mutex_unlock(&s->lock);
      ctx->nchecks = 0;
      return;
    }
    /* Out of memory keeping them: wait for the work, then read them here. */
    nv__gpu_sub_wait(s);
    pthread_mutex_lock(&s->lock);
    resolve_list(s, ctx->dev, ctx->checks, ctx->nchecks);
    pthread_mutex_unlock(&s->lock);
    ctx->nchecks = 0;
    return;
  }
  nv__gpu_checks_drop(ctx->dev, ctx->checks, ctx->nchecks);
  ctx->nchecks = 0;
}

void nv__gpu_checks_resolve(nv__gpu_sub *s) {
  if (!s->nchecks) return;
  resolve_list(s, s->dev, s->checks, s->nchecks);
  free(s->checks);
  s->checks = NULL;
  s->nchecks = 0;
}
