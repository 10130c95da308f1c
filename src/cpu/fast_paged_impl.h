/* The body of paged attention's CPU kernel in one compute type, included by src/cpu/fast_paged.c
 * twice: with C float (float16, bfloat16, float32) and with C double (float64), NAME(x) naming
 * the type's functions and EXP its exponential. */

/* n elements of a row of dtype dt at x as C: x itself when it already is C, else converted
 * into tmp. */
static const C *NAME(row)(const void *x, nv_dtype dt, int n, C *tmp) {
  if (dt == NV_DTYPE_FLOAT16) {
    for (int i = 0; i < n; i++) tmp[i] = (C)nv__f16_to_f32(((const uint16_t *)x)[i]);
    return tmp;
  }
  if (dt == NV_DTYPE_BFLOAT16) {
    for (int i = 0; i < n; i++) tmp[i] = (C)nv__bf16_to_f32(((const uint16_t *)x)[i]);
    return tmp;
  }
  return (const C *)x; /* float32 with C float, float64 with C double */
}

/* Element i of the output (its dtype) set to x. */
static void NAME(store)(const paged_job *j, int64_t i, C x) {
  switch (j->dt) {
    case NV_DTYPE_FLOAT16: ((uint16_t *)j->out)[i] = nv__f32_to_f16((float)x); break;
    case NV_DTYPE_BFLOAT16: ((uint16_t *)j->out)[i] = nv__f32_to_bf16((float)x); break;
    case NV_DTYPE_FLOAT32: ((float *)j->out)[i] = (float)x; break;
    default: ((double *)j->out)[i] = (double)x; break;
  }
}

NV_KERNEL_CLONES static C NAME(dot)(const C *a, const C *b, int n) {
  C s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* o[0, n) += p v[0, n) */
NV_KERNEL_CLONES static void NAME(axpy)(C *o, C p, const C *v, int n) {
  for (int i = 0; i < n; i++) o[i] += p * v[i];
}

NV_KERNEL_CLONES static void NAME(scale)(C *o, C f, int n) {
  for (int i = 0; i < n; i++) o[i] *= f;
}

/* Task t: the G query rows of token (s, i) reading key/value head hkv, over split `split` of
 * the keys that token sees, in blocks of at most KEYS keys: the scores, the online softmax
 * (running maxima m, sums l, output rows O rescaled as the maxima grow), then O normalized into
 * the output, or (several splits) the unnormalized partial with its m and l. */
static void NAME(task)(const paged_job *j, int64_t t, C *work) {
  const int G = j->G, D = j->D, Dv = j->Dv, BS = j->BS;
  const int split = (int)(t % j->nsplit);
  t /= j->nsplit;
  const int hkv = (int)(t % j->Hkv);
  const int64_t tok = t / j->Hkv; /* = s c + i */
  const int64_t s = tok / j->c, i = tok % j->c;
  C *Q = work, *O = Q + (size_t)G * D, *Sc = O + (size_t)G * Dv, *m = Sc + (size_t)G * KEYS;
  C *l = m + G, *kt = l + G, *vt = kt + D;
  const size_t es = nv_dtype_size(j->dt);
  for (int g = 0; g < G; g++) {
    const int hq = hkv * G + g;
    const C *qr = NAME(row)(j->q + ((size_t)tok * j->Hq + hq) * D * es, j->dt, D, kt);
    for (int d = 0; d < D; d++) Q[(size_t)g * D + d] = qr[d] * (C)j->scale;
    m[g] = -INFINITY;
    l[g] = 0;
  }
  memset(O, 0, (size_t)G * Dv * sizeof *O);
  /* the keys this token sees: j <= L - c + i, within [0, L) */
  int64_t L = j->lens[s], kend = L - j->c + i + 1;
  if (kend < 0) kend = 0;
  int64_t ks = (int64_t)split * j->split_len, ke = ks + j->split_len;
  if (ke > kend) ke = kend;
  const int32_t *table = j->tables + s * j->M;
  const size_t kstride = (size_t)j->Hkv * D, vstride = (size_t)j->Hkv * Dv;
  for (int64_t j0 = ks; j0 < ke; j0 += KEYS) {
    const int n = ke - j0 < KEYS ? (int)(ke - j0) : KEYS;
    for (int x = 0; x < n; x++) {
      const int64_t key = j0 + x, slot = (int64_t)table[key / BS] * BS + key % BS;
      const C *kr = NAME(row)(j->k + ((size_t)slot * kstride + (size_t)hkv * D) * es, j->dt, D, kt);
      for (int g = 0; g < G; g++) Sc[(size_t)g * KEYS + x] = NAME(dot)(Q + (size_t)g * D, kr, D);
    }
    for (int g = 0; g < G; g++) {
      /* the maximum ignores NaN scores: their exponentials make l and O NaN anyway */
      C *sc = Sc + (size_t)g * KEYS, mnew = m[g];
      for (int x = 0; x < n; x++)
        if (sc[x] > mnew) mnew = sc[x];
      /* a row whose scores are all -inf so far keeps exponentials of 0, not NaN */
      const C mu = mnew == -INFINITY ? 0 : mnew, corr = EXP(m[g] - mu);
      C sum = 0;
      for (int x = 0; x < n; x++) {
        sc[x] = EXP(sc[x] - mu);
        sum += sc[x];
      }
      l[g] = l[g] * corr + sum;
      m[g] = mnew;
      if (corr != 1) NAME(scale)(O + (size_t)g * Dv, corr, Dv);
    }
    for (int x = 0; x < n; x++) {
      const int64_t key = j0 + x, slot = (int64_t)table[key / BS] * BS + key % BS;
      const C *vr = NAME(row)(j->v + ((size_t)slot * vstride + (size_t)hkv * Dv) * es, j->dt, Dv, vt);
      for (int g = 0; g < G; g++) NAME(axpy)(O + (size_t)g * Dv, Sc[(size_t)g * KEYS + x], vr, Dv);
    }
  }
  for (int g = 0; g < G; g++) {
    const int64_t orow = tok * j->Hq + hkv * G + g;
    const C *o = O + (size_t)g * Dv;
    if (j->nsplit > 1) {
      C *pt = (C *)j->part + ((size_t)orow * j->nsplit + split) * (size_t)(Dv + 2);
      memcpy(pt, o, (size_t)Dv * sizeof *pt);
      pt[Dv] = m[g];
      pt[Dv + 1] = l[g];
    } else {
      /* no key seen (or every score -inf): 0 */
      const C inv = l[g] == 0 ? 0 : 1 / l[g];
      for (int d = 0; d < Dv; d++) NAME(store)(j, orow * Dv + d, o[d] * inv);
    }
  }
}

/* Output rows [b, e) from their splits' partials, each weighted by exp(its maximum - the
 * largest). */
static void NAME(combine)(void *ctx, int64_t b, int64_t e) {
  const paged_job *j = ctx;
  const int Dv = j->Dv, ns = j->nsplit;
  for (int64_t row = b; row < e; row++) {
    const C *pt = (const C *)j->part + (size_t)row * ns * (Dv + 2);
    C M = -INFINITY;
    for (int sp = 0; sp < ns; sp++)
      if (pt[(size_t)sp * (Dv + 2) + Dv] > M) M = pt[(size_t)sp * (Dv + 2) + Dv];
    const C mu = M == -INFINITY ? 0 : M;
    C L = 0;
    for (int sp = 0; sp < ns; sp++)
      L += pt[(size_t)sp * (Dv + 2) + Dv + 1] * EXP(pt[(size_t)sp * (Dv + 2) + Dv] - mu);
    const C inv = L == 0 ? 0 : 1 / L;
    for (int d = 0; d < Dv; d++) {
      C acc = 0;
      for (int sp = 0; sp < ns; sp++)
        acc += pt[(size_t)sp * (Dv + 2) + d] * EXP(pt[(size_t)sp * (Dv + 2) + Dv] - mu);
      NAME(store)(j, row * Dv + d, acc * inv);
    }
  }
}

static void NAME(range)(void *ctx, int64_t b, int64_t e) {
  paged_job *j = ctx;
  size_t n = (size_t)j->G * (j->D + j->Dv + KEYS + 2) + (size_t)j->D + (size_t)j->Dv;
  C *work = malloc(n * sizeof *work);
  if (!work) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t t = b; t < e; t++) NAME(task)(j, t, work);
  free(work);
}
