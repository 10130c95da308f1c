/* The body of paged attention's CPU kernel in one compute type, included by src/cpu/fast_paged.c
 * twice: with C float (float16, bfloat16, float32) and with C double (float64), NAME(x) naming
 * the type's functions, EXP its exponential and GEMM its BLAS gemm. */

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

NV_KERNEL_CLONES static void NAME(scale)(C *o, C f, int n) {
  for (int i = 0; i < n; i++) o[i] *= f;
}

/* Task t: the rows (G heads x up to qrows query tokens, head-major) of sequence s's query
 * block reading key/value head hkv, over split `split` of the keys the block sees, in blocks
 * of at most KEYS keys gathered through the table (converted to C): the scores by GEMM, the
 * causal limit of each row, the online softmax (running maxima m, sums l, output rows O
 * rescaled as the maxima grow), O += P V by GEMM; then O normalized into the output, or
 * (several splits) the unnormalized partial with its m and l. */
static void NAME(task)(const paged_job *j, int64_t t, C *work) {
  const int G = j->G, D = j->D, Dv = j->Dv, BS = j->BS;
  const int split = (int)(t % j->nsplit);
  t /= j->nsplit;
  const int qb = (int)(t % j->nqb);
  t /= j->nqb;
  const int hkv = (int)(t % j->Hkv);
  const int64_t s = t / j->Hkv, q0 = (int64_t)qb * j->qrows;
  const int nq = (int)(j->c - q0 < j->qrows ? j->c - q0 : j->qrows), rows = G * nq;
  const size_t R = (size_t)G * j->qrows;
  C *Q = work, *O = Q + R * D, *Sc = O + R * Dv, *m = Sc + R * KEYS, *l = m + R;
  C *Kt = l + R, *Vt = Kt + (size_t)KEYS * D;
  const size_t es = nv_dtype_size(j->dt);
  const int64_t L = j->lens[s];
  for (int r = 0; r < rows; r++) {
    const int64_t tok = s * j->c + q0 + r % nq;
    const int hq = hkv * G + r / nq;
    const C *qr = NAME(row)(j->q + ((size_t)tok * j->Hq + hq) * D * es, j->dt, D, Kt);
    for (int d = 0; d < D; d++) Q[(size_t)r * D + d] = qr[d] * (C)j->scale;
    m[r] = -INFINITY;
    l[r] = 0;
  }
  memset(O, 0, (size_t)rows * Dv * sizeof *O);
  /* the keys the block's last query sees: j <= L - c + q0 + nq - 1, within [0, L) */
  int64_t kend = L - j->c + q0 + nq;
  if (kend < 0) kend = 0;
  const int64_t ks = (int64_t)split * j->split_len;
  int64_t ke = ks + j->split_len;
  if (ke > kend) ke = kend;
  const int32_t *table = j->tables + s * j->M;
  const size_t kstride = (size_t)j->Hkv * D, vstride = (size_t)j->Hkv * Dv;
  for (int64_t j0 = ks; j0 < ke; j0 += KEYS) {
    const int n = ke - j0 < KEYS ? (int)(ke - j0) : KEYS;
    for (int x = 0; x < n; x++) {
      const int64_t key = j0 + x, slot = (int64_t)table[key / BS] * BS + key % BS;
      const char *kr = j->k + ((size_t)slot * kstride + (size_t)hkv * D) * es;
      const char *vr = j->v + ((size_t)slot * vstride + (size_t)hkv * Dv) * es;
      const C *kc = NAME(row)(kr, j->dt, D, Kt + (size_t)x * D);
      if (kc != Kt + (size_t)x * D) memcpy(Kt + (size_t)x * D, kc, (size_t)D * sizeof *Kt);
      const C *vc = NAME(row)(vr, j->dt, Dv, Vt + (size_t)x * Dv);
      if (vc != Vt + (size_t)x * Dv) memcpy(Vt + (size_t)x * Dv, vc, (size_t)Dv * sizeof *Vt);
    }
    /* zeroed first: BLAS may read C even with beta = 0 (and skips it when D = 0) */
    memset(Sc, 0, (size_t)rows * n * sizeof *Sc);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, D, 1, Q, D, Kt, D, 0, Sc, n);
    for (int r = 0; r < rows; r++) {
      C *sc = Sc + (size_t)r * n, mnew = m[r];
      const int64_t last = L - j->c + q0 + r % nq; /* the last key this row sees */
      for (int x = 0; x < n; x++)
        if (j0 + x > last) sc[x] = -INFINITY;
      /* the maximum ignores NaN scores: their exponentials make l and O NaN anyway */
      for (int x = 0; x < n; x++)
        if (sc[x] > mnew) mnew = sc[x];
      /* a row whose scores are all -inf so far keeps exponentials of 0, not NaN */
      const C mu = mnew == -INFINITY ? 0 : mnew, corr = EXP(m[r] - mu);
      C sum = 0;
      for (int x = 0; x < n; x++) {
        sc[x] = EXP(sc[x] - mu);
        sum += sc[x];
      }
      l[r] = l[r] * corr + sum;
      m[r] = mnew;
      if (corr != 1) NAME(scale)(O + (size_t)r * Dv, corr, Dv);
    }
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, Dv, n, 1, Sc, n, Vt, Dv, 1, O, Dv);
  }
  for (int r = 0; r < rows; r++) {
    const int64_t orow = (s * j->c + q0 + r % nq) * j->Hq + hkv * G + r / nq;
    const C *o = O + (size_t)r * Dv;
    if (j->nsplit > 1) {
      C *pt = (C *)j->part + ((size_t)orow * j->nsplit + split) * (size_t)(Dv + 2);
      memcpy(pt, o, (size_t)Dv * sizeof *pt);
      pt[Dv] = m[r];
      pt[Dv + 1] = l[r];
    } else {
      /* no key seen (or every score -inf): 0 */
      const C inv = l[r] == 0 ? 0 : 1 / l[r];
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
  const size_t R = (size_t)j->G * j->qrows;
  size_t n = R * (j->D + j->Dv + KEYS + 2) + (size_t)KEYS * (j->D + j->Dv);
  C *work = malloc(n * sizeof *work);
  if (!work) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t t = b; t < e; t++) NAME(task)(j, t, work);
  free(work);
}
