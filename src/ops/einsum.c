/* einsum and einsum_path: a composition of existing ops (no primitive of its own, so its
 * gradients, vmap and GPU kernels are those of diagonal, sum, transpose, reshape, broadcast_to
 * and matmul). Subscripts are parsed into integer labels (a-z: 0-25, A-Z: 26-51, the axes an
 * ellipsis stands for: 52 onwards, right-aligned across operands so they broadcast). Each
 * operand first takes the diagonals of its repeated labels and sums the labels no other operand
 * and not the output has; then NumPy's greedy order contracts pairs, each pair's kept labels
 * being those of the output and of the other operands: the shared kept labels are batch axes,
 * the shared others are contracted, so a pair is one batched matmul of (batch, M, K) by
 * (batch, K, N) after transposes and reshapes. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nuvec.h"
#include "ops/ops_internal.h"

#define EIN_MAX_OPS 64
#define EIN_LETTERS 52
#define EIN_LABELS (EIN_LETTERS + NV__MAX_DIMS)

typedef struct lset {
  uint64_t w[2];
} lset;

static bool has(lset s, int l) { return (s.w[l >> 6] >> (l & 63)) & 1; }
static void add(lset *s, int l) { s->w[l >> 6] |= (uint64_t)1 << (l & 63); }
static lset uni(lset a, lset b) { return (lset){{a.w[0] | b.w[0], a.w[1] | b.w[1]}}; }
static lset inter(lset a, lset b) { return (lset){{a.w[0] & b.w[0], a.w[1] & b.w[1]}}; }
static int count(lset s) { return __builtin_popcountll(s.w[0]) + __builtin_popcountll(s.w[1]); }

typedef struct term {
  int n;
  int lab[NV__MAX_DIMS];
} term;

typedef struct parsed {
  int nops;
  term in[EIN_MAX_OPS];
  term out;
  int64_t size[EIN_LABELS];
  char msg[256]; /* why parsing failed */
} parsed;

static int letter(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
  return -1;
}

/* The character of a letter label ('.' for the broadcast ones). */
static char lchar(int l) { return l < 26 ? (char)('a' + l) : l < EIN_LETTERS ? (char)('A' + l - 26) : '.'; }

static bool fail(parsed *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parsed *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->msg, sizeof p->msg, fmt, ap);
  va_end(ap);
  return false;
}

/* Scans one term [s, e): its letters into t (ellipsis as -1 once), false if malformed. */
static bool scan_term(parsed *p, const char *s, const char *e, term *t, bool *ell) {
  t->n = 0;
  *ell = false;
  for (const char *c = s; c < e; c++) {
    if (*c == ' ') continue;
    if (*c == '.') {
      if (*ell || e - c < 3 || c[1] != '.' || c[2] != '.')
        return fail(p, "invalid ellipsis in the subscript '%.*s'", (int)(e - s), s);
      *ell = true;
      t->lab[t->n++] = -1;
      c += 2;
      continue;
    }
    int l = letter(*c);
    if (l < 0) return fail(p, "invalid character '%c' in the subscripts", *c);
    if (t->n >= NV__MAX_DIMS) return fail(p, "too many labels in a subscript");
    t->lab[t->n++] = l;
  }
  return true;
}

/* Expands a term's ellipsis into `e` broadcast labels (the last e of the nell). */
static bool expand(parsed *p, term *t, int e, int nell) {
  term r = {0};
  for (int i = 0; i < t->n; i++) {
    if (t->lab[i] >= 0) {
      r.lab[r.n++] = t->lab[i];
      continue;
    }
    if (r.n + e > NV__MAX_DIMS) return fail(p, "too many dimensions");
    for (int k = 0; k < e; k++) r.lab[r.n++] = EIN_LETTERS + nell - e + k;
  }
  *t = r;
  return true;
}

static bool parse(parsed *p, const char *subs, const nv_array *const *ops, int n) {
  memset(p, 0, sizeof *p);
  if (!subs) return fail(p, "subscripts are NULL");
  if (n < 1 || n > EIN_MAX_OPS) return fail(p, "%d operands (1 to %d allowed)", n, EIN_MAX_OPS);
  p->nops = n;
  const char *arrow = strstr(subs, "->");
  const char *end = arrow ? arrow : subs + strlen(subs);
  bool ell[EIN_MAX_OPS];
  int k = 0, nell = 0, e_of[EIN_MAX_OPS];
  for (const char *s = subs;; k++) {
    const char *c = s;
    while (c < end && *c != ',') c++;
    if (k >= n) return fail(p, "more subscripts than the %d operands", n);
    if (!scan_term(p, s, c, &p->in[k], &ell[k])) return false;
    int letters = p->in[k].n - (ell[k] ? 1 : 0), nd = nv__out(ops[k])->ndim;
    if (ell[k] ? letters > nd : letters != nd)
      return fail(p, "the subscript '%.*s' has %d labels for operand %d of %d dimensions",
                  (int)(c - s), s, letters, k, nd);
    e_of[k] = ell[k] ? nd - letters : 0;
    if (e_of[k] > nell) nell = e_of[k];
    if (c >= end) break;
    s = c + 1;
  }
  if (k + 1 != n) return fail(p, "%d subscripts for %d operands", k + 1, n);
  for (int i = 0; i < EIN_LABELS; i++) p->size[i] = -1;
  int occurs[EIN_LABELS] = {0};
  bool any_ell = false;
  for (int i = 0; i < n; i++) {
    any_ell |= ell[i];
    if (!expand(p, &p->in[i], e_of[i], nell)) return false;
    const nv__output *o = nv__out(ops[i]);
    for (int d = 0; d < p->in[i].n; d++) {
      int l = p->in[i].lab[d], s = o->shape[d];
      occurs[l]++;
      int64_t *z = &p->size[l];
      if (*z < 0 || *z == s) {
        *z = s;
      } else if (*z == 1 || s == 1) {
        if (s > *z) *z = s; /* axes of size 1 broadcast, for letters as for ellipsis axes (MLX) */
      } else {
        return fail(p, "label '%c' has sizes %lld and %d", lchar(l), (long long)*z, s);
      }
    }
  }
  term *out = &p->out;
  if (arrow) {
    bool oe;
    if (!scan_term(p, arrow + 2, arrow + 2 + strlen(arrow + 2), out, &oe)) return false;
    if (!expand(p, out, nell, nell)) return false;
    lset seen = {{0, 0}};
    for (int i = 0; i < out->n; i++) {
      int l = out->lab[i];
      if (l < EIN_LETTERS && !occurs[l])
        return fail(p, "output label '%c' is not in any input", lchar(l));
      if (has(seen, l)) return fail(p, "output label repeated in '%s'", arrow + 2);
      add(&seen, l);
    }
  } else {
    out->n = 0;
    if (any_ell)
      for (int i = 0; i < nell; i++) out->lab[out->n++] = EIN_LETTERS + i;
    for (int c = 'A'; c <= 'z'; c++) {
      int l = letter((char)c);
      if (l >= 0 && occurs[l] == 1) out->lab[out->n++] = l;
    }
  }
  return true;
}

static lset term_set(const term *t) {
  lset s = {{0, 0}};
  for (int i = 0; i < t->n; i++) add(&s, t->lab[i]);
  return s;
}

static double set_size(const parsed *p, lset s) {
  double z = 1;
  for (int l = 0; l < EIN_LABELS; l++)
    if (has(s, l)) z *= (double)p->size[l];
  return z;
}

/* The label sets after each operand's own reductions: labels in no other operand and not in the
 * output are summed first. */
static void prep_sets(const parsed *p, lset *sets) {
  lset outs = term_set(&p->out);
  for (int i = 0; i < p->nops; i++) {
    lset others = outs;
    for (int j = 0; j < p->nops; j++)
      if (j != i) others = uni(others, term_set(&p->in[j]));
    sets[i] = inter(term_set(&p->in[i]), others);
  }
}

/* The greedy step over the current sets: the pair that shares labels (else any) with the least
 * growth size(result) - size(a) - size(b); ties to the first pair. */
static void greedy_pick(const parsed *p, const lset *sets, int m, int *bi, int *bj) {
  lset outs = term_set(&p->out);
  double best = 0;
  bool best_share = false, found = false;
  for (int i = 0; i < m; i++)
    for (int j = i + 1; j < m; j++) {
      lset keep = outs;
      for (int k = 0; k < m; k++)
        if (k != i && k != j) keep = uni(keep, sets[k]);
      lset r = inter(uni(sets[i], sets[j]), keep);
      bool share = count(inter(sets[i], sets[j])) > 0;
      double cost = set_size(p, r) - set_size(p, sets[i]) - set_size(p, sets[j]);
      if (!found || (share && !best_share) || (share == best_share && cost < best)) {
        found = true;
        best = cost;
        best_share = share;
        *bi = i;
        *bj = j;
      }
    }
}

/* The whole path with its cost figures. */
typedef struct plan {
  int steps;
  int pair[EIN_MAX_OPS][2];
  int naive_scaling, opt_scaling;
  double naive_flops, opt_flops;
} plan;

static void make_plan(const parsed *p, plan *pl) {
  lset sets[EIN_MAX_OPS], all = term_set(&p->out);
  for (int i = 0; i < p->nops; i++) all = uni(all, term_set(&p->in[i]));
  pl->naive_scaling = count(all);
  pl->naive_flops = set_size(p, all) * p->nops;
  prep_sets(p, sets);
  if (p->nops == 1) {
    pl->steps = 1;
    pl->pair[0][0] = 0;
    pl->pair[0][1] = -1;
    lset s = term_set(&p->in[0]);
    pl->opt_scaling = count(s);
    pl->opt_flops = set_size(p, s);
    return;
  }
  int m = p->nops;
  pl->steps = 0;
  pl->opt_scaling = 0;
  pl->opt_flops = 0;
  lset outs = term_set(&p->out);
  while (m > 1) {
    int i = 0, j = 1;
    greedy_pick(p, sets, m, &i, &j);
    lset keep = outs;
    for (int k = 0; k < m; k++)
      if (k != i && k != j) keep = uni(keep, sets[k]);
    lset u = uni(sets[i], sets[j]);
    if (count(u) > pl->opt_scaling) pl->opt_scaling = count(u);
    pl->opt_flops += set_size(p, u) * 2;
    pl->pair[pl->steps][0] = i;
    pl->pair[pl->steps][1] = j;
    pl->steps++;
    lset r = inter(u, keep);
    int w = 0;
    for (int k = 0; k < m; k++)
      if (k != i && k != j) sets[w++] = sets[k];
    sets[w] = r;
    m = w + 1;
  }
}

/* ---- Execution ---- */

typedef struct eop {
  nv_array *x; /* owned */
  term t;
} eop;

static void replace(eop *o, nv_array *y) {
  nv_release(o->x);
  o->x = y;
}

/* Diagonals of repeated labels, then sums of the labels not in `keep`. */
static void reduce_own(eop *o, lset keep) {
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; i < o->t.n && !again; i++)
      for (int j = i + 1; j < o->t.n && !again; j++) {
        if (o->t.lab[i] != o->t.lab[j]) continue;
        int l = o->t.lab[i];
        replace(o, nv_diagonal(o->x, 0, i, j));
        term r = {0};
        for (int k = 0; k < o->t.n; k++)
          if (k != i && k != j) r.lab[r.n++] = o->t.lab[k];
        r.lab[r.n++] = l;
        o->t = r;
        again = true;
      }
  }
  int axes[NV__MAX_DIMS], na = 0;
  term r = {0};
  for (int i = 0; i < o->t.n; i++) {
    if (has(keep, o->t.lab[i]))
      r.lab[r.n++] = o->t.lab[i];
    else
      axes[na++] = i;
  }
  if (na) {
    replace(o, nv_sum(o->x, axes, na, false));
    o->t = r;
  }
}

static int find(const term *t, int l) {
  for (int i = 0; i < t->n; i++)
    if (t->lab[i] == l) return i;
  return -1;
}

/* Product of sizes as an int, or -1 past INT_MAX. */
static int prod(const parsed *p, const int *labs, int n) {
  int64_t z = 1;
  for (int i = 0; i < n; i++) {
    z *= p->size[labs[i]];
    if (z > INT_MAX) return -1;
  }
  return (int)z;
}

/* `x` transposed by perm and broadcast to the labels' sizes (axes of size 1 broadcast). */
static nv_array *arrange(const parsed *p, const nv_array *x, const int *perm, const int *labs,
                         int n) {
  nv_array *t = nv_transpose(x, perm, n);
  int shape[NV__MAX_DIMS];
  bool same = true;
  for (int i = 0; i < n; i++) {
    shape[i] = (int)p->size[labs[i]];
    same &= nv__out(t)->shape[i] == shape[i];
  }
  if (same) return t;
  nv_array *b = nv_broadcast_to(t, shape, n);
  nv_release(t);
  return b;
}

static bool contract(const parsed *p, eop *a, eop *b, lset keep, eop *r) {
  lset sb = term_set(&b->t), sa = term_set(&a->t);
  int bat[NV__MAX_DIMS], con[NV__MAX_DIMS], fa[NV__MAX_DIMS], fb[NV__MAX_DIMS];
  int nb = 0, nc = 0, nfa = 0, nfb = 0;
  for (int i = 0; i < a->t.n; i++) {
    int l = a->t.lab[i];
    if (!has(sb, l))
      fa[nfa++] = l;
    else if (has(keep, l))
      bat[nb++] = l;
    else
      con[nc++] = l;
  }
  for (int i = 0; i < b->t.n; i++)
    if (!has(sa, b->t.lab[i])) fb[nfb++] = b->t.lab[i];
  int la[NV__MAX_DIMS], lb[NV__MAX_DIMS], pa[NV__MAX_DIMS], pb[NV__MAX_DIMS], k = 0;
  for (int i = 0; i < nb; i++) la[k++] = bat[i];
  for (int i = 0; i < nfa; i++) la[k++] = fa[i];
  for (int i = 0; i < nc; i++) la[k++] = con[i];
  k = 0;
  for (int i = 0; i < nb; i++) lb[k++] = bat[i];
  for (int i = 0; i < nc; i++) lb[k++] = con[i];
  for (int i = 0; i < nfb; i++) lb[k++] = fb[i];
  for (int i = 0; i < a->t.n; i++) pa[i] = find(&a->t, la[i]);
  for (int i = 0; i < b->t.n; i++) pb[i] = find(&b->t, lb[i]);
  int B = prod(p, bat, nb), M = prod(p, fa, nfa), K = prod(p, con, nc), N = prod(p, fb, nfb);
  if (B < 0 || M < 0 || K < 0 || N < 0) return false;
  nv_array *at = arrange(p, a->x, pa, la, a->t.n), *bt = arrange(p, b->x, pb, lb, b->t.n);
  int s3a[3] = {B, M, K}, s3b[3] = {B, K, N};
  nv_array *a3 = nv_reshape(at, s3a, 3), *b3 = nv_reshape(bt, s3b, 3);
  nv_array *m = nv_matmul(a3, b3);
  r->t.n = 0;
  int shape[NV__MAX_DIMS];
  for (int i = 0; i < nb; i++) r->t.lab[r->t.n++] = bat[i];
  for (int i = 0; i < nfa; i++) r->t.lab[r->t.n++] = fa[i];
  for (int i = 0; i < nfb; i++) r->t.lab[r->t.n++] = fb[i];
  for (int i = 0; i < r->t.n; i++) shape[i] = (int)p->size[r->t.lab[i]];
  r->x = nv_reshape(m, shape, r->t.n);
  nv_release(m);
  nv_release(a3);
  nv_release(b3);
  nv_release(at);
  nv_release(bt);
  return true;
}

/* The last operand into the output: sums, transpose, broadcast. */
static nv_array *finish(const parsed *p, eop *o) {
  reduce_own(o, term_set(&p->out));
  int perm[NV__MAX_DIMS];
  for (int i = 0; i < p->out.n; i++) perm[i] = find(&o->t, p->out.lab[i]);
  return arrange(p, o->x, perm, p->out.lab, p->out.n);
}

nv_array *nv_einsum(const char *subscripts, const nv_array *const *operands, int n) {
  if (n < 1 || !operands)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "einsum", "needs at least one operand");
  nv_array *f = nv__op_check("einsum", operands, n);
  if (f) return f;
  parsed *p = nv__malloc(sizeof *p);
  plan *pl = nv__malloc(sizeof *pl);
  eop *cur = nv__malloc((size_t)(n + 1) * sizeof *cur);
  if (!p || !pl || !cur) {
    nv__free(p), nv__free(pl), nv__free(cur);
    return nv__op_error(NV_ERR_OUT_OF_MEMORY, "einsum", "out of memory");
  }
  nv_array *res = NULL;
  if (!parse(p, subscripts, operands, n)) {
    res = nv__op_error(NV_ERR_INVALID_ARGUMENT, "einsum", "%s", p->msg);
  } else {
    make_plan(p, pl);
    nv__scope_suspend();
    lset outs = term_set(&p->out), sets[EIN_MAX_OPS];
    prep_sets(p, sets);
    for (int i = 0; i < n; i++) {
      /* An operand's size-1 axes of a label that is larger elsewhere are broadcast to it, so
       * the contractions see one size per label. */
      const nv__output *o = nv__out(operands[i]);
      int shape[NV__MAX_DIMS];
      bool wide = false;
      for (int d = 0; d < o->ndim; d++) {
        shape[d] = (int)p->size[p->in[i].lab[d]];
        wide |= shape[d] != o->shape[d];
      }
      cur[i].x = wide ? nv_broadcast_to(operands[i], shape, o->ndim)
                      : nv_retain((nv_array *)operands[i]);
      cur[i].t = p->in[i];
      reduce_own(&cur[i], sets[i]);
    }
    int m = n;
    bool ok = true;
    for (int s = 0; s < pl->steps && m > 1 && ok; s++) {
      int i = pl->pair[s][0], j = pl->pair[s][1];
      lset keep = outs;
      for (int k = 0; k < m; k++)
        if (k != i && k != j) keep = uni(keep, term_set(&cur[k].t));
      eop r;
      ok = contract(p, &cur[i], &cur[j], keep, &r);
      if (!ok) break;
      nv_release(cur[i].x);
      nv_release(cur[j].x);
      int w = 0;
      for (int k = 0; k < m; k++)
        if (k != i && k != j) cur[w++] = cur[k];
      cur[w] = r;
      m = w + 1;
    }
    if (ok) res = finish(p, &cur[0]);
    for (int k = 0; k < m; k++) nv_release(cur[k].x);
    nv__scope_resume();
    if (ok)
      nv__scope_register(res);
    else
      res = nv__op_error(NV_ERR_INVALID_ARGUMENT, "einsum", "a contraction exceeds %d elements",
                         INT_MAX);
  }
  nv__free(p), nv__free(pl), nv__free(cur);
  return res;
}

nv_status nv_einsum_path(const char *subscripts, const nv_array *const *operands, int n,
                         int *path, int *nsteps, char *report, size_t report_size) {
  if (n < 1 || !operands || !path || !nsteps)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "einsum_path: needs operands and outputs");
  for (int i = 0; i < n; i++)
    if (!operands[i] || !nv__meta_known(operands[i]))
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "einsum_path: operand %d is invalid", i);
  parsed *p = nv__malloc(sizeof *p);
  plan *pl = nv__malloc(sizeof *pl);
  if (!p || !pl) {
    nv__free(p), nv__free(pl);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "einsum_path: out of memory");
  }
  nv_status st = NV_OK;
  if (!parse(p, subscripts, operands, n)) {
    st = nv__set_error(NV_ERR_INVALID_ARGUMENT, "einsum_path: %s", p->msg);
  } else {
    make_plan(p, pl);
    for (int s = 0; s < pl->steps; s++) {
      path[2 * s] = pl->pair[s][0];
      path[2 * s + 1] = pl->pair[s][1];
    }
    *nsteps = pl->steps;
    if (report && report_size)
      snprintf(report, report_size,
               "  Complete contraction:  %s\n         Naive scaling:  %d\n     Optimized "
               "scaling:  %d\n      Naive FLOP count:  %.0f\n  Optimized FLOP count:  %.0f\n",
               subscripts, pl->naive_scaling, pl->opt_scaling, pl->naive_flops, pl->opt_flops);
  }
  nv__free(p), nv__free(pl);
  return st;
}
