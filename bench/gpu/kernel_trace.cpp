/* kernel_trace: a preloaded library that records every kernel, copy and set the process runs on
 * the GPU (CUPTI's activity records: kernels inside CUDA graphs included, each with its own start
 * and end) and prints, when the process exits, a table of them grouped by name: count, total and
 * mean time, share of the GPU's busy time; and the whole span from the first start to the last
 * end beside the busy time (the gaps between kernels). A cheap stand-in for Nsight Systems, which
 * the device machine lacks (Nsight Compute replays each kernel alone and takes minutes):
 *
 *   LD_PRELOAD=libkernel_trace.so KTRACE_OUT=trace.txt [KTRACE_TOP=40] prog ...
 *
 * A program that calls `ktrace_mark(name)` and `ktrace_mark(NULL)` (found with dlsym; bench_gpu
 * does around each case's timed run, its GPU work finished at both) gets one table per such
 * section, of what started within it; without marks, one table of everything.
 * KTRACE_TIMELINE=name adds the timeline of the sections whose names contain `name`: the GPU's
 * busy stretches beside the host's runtime calls (graph launches and updates, waits).
 * The table goes to KTRACE_OUT (else stderr). Needs libcupti (CUDA's extras, or the
 * nvidia-cuda-cupti wheel) on the library path. Used by tests/gpu/run.sh stage 17. */
#include <cupti.h>
#include <cxxabi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct span {
  uint64_t start, end;
  std::string name;
  bool host; /* a runtime API call (its thread), not GPU work */
  uint32_t thread;
};

std::mutex mu;
std::vector<span> spans;
bool enabled = false;
struct section {
  std::string name;
  uint64_t begin, end; /* CUPTI's clock */
};
std::vector<section> sections;

void warn(const char *what, CUptiResult r) {
  const char *s = "?";
  cuptiGetResultString(r, &s);
  fprintf(stderr, "kernel_trace: %s: %s\n", what, s);
}

std::string pretty(const char *mangled) {
  if (!mangled) return "?";
  int st = 0;
  char *d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
  std::string s = st == 0 && d ? d : mangled;
  free(d);
  /* Template arguments make names long: keep the name and its first 60 argument characters. */
  size_t lt = s.find('<');
  if (lt != std::string::npos && s.size() > lt + 60) s = s.substr(0, lt + 60) + "...>";
  size_t paren = s.find('(');
  if (paren != std::string::npos) s = s.substr(0, paren);
  return s;
}

void report();

void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max_records) {
  /* Registered at the first buffer, after the CUDA runtime registered its own exit handlers, so
   * this one runs first, while the context still exists. */
  static std::once_flag once;
  std::call_once(once, [] { atexit(report); });
  *size = 8u << 20;
  *buf = (uint8_t *)aligned_alloc(8, *size);
  *max_records = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
  CUpti_Activity *rec = nullptr;
  std::vector<span> got;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto *k = (CUpti_ActivityKernel10 *)rec;
      got.push_back({k->start, k->end, pretty(k->name), false, 0});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto *m = (CUpti_ActivityMemcpy6 *)rec;
      got.push_back({m->start, m->end, "[memcpy kind " + std::to_string(m->copyKind) + "]", false, 0});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto *m = (CUpti_ActivityMemset4 *)rec;
      got.push_back({m->start, m->end, "[memset]", false, 0});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      auto *a = (CUpti_ActivityAPI *)rec;
      const char *nm = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &nm) != CUPTI_SUCCESS || !nm)
        nm = "?";
      got.push_back({a->start, a->end, nm, true, a->threadId});
      break;
    }
    default: break;
    }
  }
  free(buf);
  std::lock_guard<std::mutex> g(mu);
  spans.insert(spans.end(), got.begin(), got.end());
}

void table(FILE *f, const char *title, uint64_t begin, uint64_t end) {
  struct agg {
    uint64_t n = 0, ns = 0;
  };
  std::unordered_map<std::string, agg> by;
  uint64_t busy = 0, lo = UINT64_MAX, hi = 0, cover = 0;
  size_t count = 0;
  for (const span &s : spans) {
    if (s.host || s.start < begin || s.start >= end) continue;
    agg &a = by[s.name];
    a.n++, a.ns += s.end - s.start;
    busy += s.end - s.start;
    count++;
    lo = std::min(lo, s.start);
    /* The union of the intervals (sorted by start; kernels may overlap on several streams). */
    if (s.start >= hi) cover += s.end - s.start;
    else if (s.end > hi) cover += s.end - hi;
    hi = std::max(hi, s.end);
  }
  std::vector<std::pair<std::string, agg>> rows(by.begin(), by.end());
  std::sort(rows.begin(), rows.end(), [](auto &a, auto &b) { return a.second.ns > b.second.ns; });
  int top = getenv("KTRACE_TOP") ? atoi(getenv("KTRACE_TOP")) : 40;
  fprintf(f, "KTRACE == %s: %zu records, span %.3f ms, GPU busy (union) %.3f ms, summed %.3f ms\n",
          title, count, hi > lo ? (hi - lo) / 1e6 : 0.0, cover / 1e6, busy / 1e6);
  fprintf(f, "KTRACE %9s %6s %9s %6s  %s\n", "total_ms", "count", "mean_us", "share", "name");
  for (int i = 0; i < (int)rows.size() && i < top; i++) {
    const agg &a = rows[i].second;
    fprintf(f, "KTRACE %9.3f %6llu %9.2f %5.1f%%  %s\n", a.ns / 1e6, (unsigned long long)a.n,
            a.ns / 1e3 / (double)a.n, busy ? 100.0 * a.ns / busy : 0.0, rows[i].first.c_str());
  }
}


/* The section's timeline (KTRACE_TIMELINE names the sections, a substring): GPU work merged
 * into busy stretches (gaps under 3 us joined), and the host's runtime calls that take 4 us or
 * more or launch, update or wait; times in us from the section's start. At most 120 lines. */
void timeline(FILE *f, const char *title, uint64_t begin, uint64_t end) {
  fprintf(f, "KTRACE -- timeline of %s (us from the section's start; GPU busy stretches, host calls)\n", title);
  int lines = 0;
  uint64_t bs = 0, be = 0;
  size_t nk = 0;
  std::string first, last;
  auto flush_busy = [&]() {
    if (!nk) return;
    if (lines++ < 120)
      fprintf(f, "KTRACE   %9.1f %9.1f GPU  %4zu kernels %8.1f us  %s .. %s\n", (bs - begin) / 1e3,
              (be - begin) / 1e3, nk, (be - bs) / 1e3, first.substr(0, 40).c_str(),
              last.substr(0, 40).c_str());
    nk = 0;
  };
  for (const span &s : spans) {
    if (s.start < begin || s.start >= end) continue;
    if (s.host) {
      const std::string &n = s.name;
      bool key = n.find("Graph") != std::string::npos || n.find("Synchronize") != std::string::npos ||
                 n.find("Query") != std::string::npos || n.find("Wait") != std::string::npos;
      if (!key && s.end - s.start < 4000) continue;
      if (n.find("Query") != std::string::npos && s.end - s.start < 4000) continue;
      flush_busy();
      if (lines++ < 120)
        fprintf(f, "KTRACE   %9.1f %9.1f host %6u %8.1f us  %s\n", (s.start - begin) / 1e3,
                (s.end - begin) / 1e3, s.thread % 1000000, (s.end - s.start) / 1e3, n.c_str());
      continue;
    }
    if (nk && s.start > be + 3000) flush_busy();
    if (!nk) bs = s.start, be = s.end, first = s.name;
    nk++;
    be = std::max(be, s.end);
    last = s.name;
  }
  flush_busy();
}

void report() {
  if (!enabled) return;
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> g(mu);
  const char *path = getenv("KTRACE_OUT");
  FILE *f = path ? fopen(path, "w") : stderr;
  if (!f) f = stderr;
  std::sort(spans.begin(), spans.end(), [](const span &a, const span &b) { return a.start < b.start; });
  if (sections.empty()) table(f, "all", 0, UINT64_MAX);
  const char *tlw = getenv("KTRACE_TIMELINE");
  for (const section &s : sections) {
    table(f, s.name.c_str(), s.begin, s.end);
    if (tlw && s.name.find(tlw) != std::string::npos) timeline(f, s.name.c_str(), s.begin, s.end);
  }
  if (f != stderr) fclose(f);
  enabled = false;
}

__attribute__((constructor)) void start() {
  CUptiResult r = cuptiActivityRegisterCallbacks(requested, completed);
  if (r != CUPTI_SUCCESS) return warn("cuptiActivityRegisterCallbacks", r);
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                      CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                      CUPTI_ACTIVITY_KIND_RUNTIME};
  for (CUpti_ActivityKind k : kinds)
    if ((r = cuptiActivityEnable(k)) != CUPTI_SUCCESS) return warn("cuptiActivityEnable", r);
  cuptiActivityFlushPeriod(200);
  enabled = true;
}

} // namespace

/* Opens a section named `name`, or closes the open one (NULL). */
extern "C" __attribute__((visibility("default"))) void ktrace_mark(const char *name) {
  uint64_t t = 0;
  if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return;
  std::lock_guard<std::mutex> g(mu);
  if (!sections.empty() && sections.back().end == UINT64_MAX) sections.back().end = t;
  if (name) sections.push_back({name, t, UINT64_MAX});
}
