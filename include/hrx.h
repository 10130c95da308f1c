/* hrx: the GPU execution runtime of nuvec.
 *
 * hrx runs prepared graphs of operations (fills, copies, kernel dispatches, captured library
 * work, native callbacks, host callbacks) over one CUDA device, or over the host engine, which
 * keeps the whole scheduling layer (hazards, regions, slots, completions, failure propagation)
 * testable on a machine without a GPU. DESIGN.md section 9 is the specification; docs/hrx.md
 * is the guide.
 *
 * Conventions. Every fallible call returns an hrx_status; out-parameters come last and are
 * written only on success. On failure the calling thread's last-error message (hrx_last_error)
 * names the call and the problem. Objects are reference counted: *_create returns a new
 * reference, *_retain adds one, *_release drops one and is NULL-safe. Unless a declaration
 * says otherwise, calls on distinct objects may run on distinct threads at once, and calls on
 * one runtime's objects are safe from several threads (the builder hrx_graph is the
 * exception: one thread at a time).
 *
 * This header is valid C11 and C++ and can be included together with cuda_runtime.h.
 */
#ifndef HRX_H
#define HRX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HRX_BUILDING_SHARED)
#define HRX_API __attribute__((visibility("default")))
#else
#define HRX_API
#endif

/* ---------------------------------------------------------------------------------------- */
/* Status and errors                                                                          */
/* ---------------------------------------------------------------------------------------- */

/* Result of every fallible hrx call. Values are append-only. HRX_E_INVALID is a caller error
 * caught by validation; HRX_E_BUSY means "try again later" (capacity, a live host mapping, or
 * no free run slot); HRX_E_DEVICE_LOST means the work, graph, buffer or whole runtime can no
 * longer be trusted (the message says which). */
typedef enum hrx_status {
  HRX_OK = 0,
  HRX_E_INVALID = 1,       /* invalid argument or a failed record-time validation */
  HRX_E_BUSY = 2,          /* resource temporarily unavailable; nothing was changed */
  HRX_E_DEVICE_LOST = 3,   /* failed work, quarantined graph, poisoned buffer, dead runtime */
  HRX_E_UNSUPPORTED = 4,   /* not available in this build or on this hardware */
  HRX_E_NO_DEVICE = 5,     /* no usable CUDA device (or no driver) */
  HRX_E_OUT_OF_MEMORY = 6, /* host or device allocation failed */
  HRX_E_CUDA = 7,          /* any other CUDA error; the message keeps CUDA's own text */
  HRX_E_CANCELLED = 8,     /* the run was cancelled, or a producer it depends on failed */
  HRX_E_TIMEOUT = 9,       /* hrx_completion_wait ran out of time; the run continues */
  HRX_E_COMPILE = 10,      /* NVRTC rejected kernel source; the message holds the log */
  HRX_E_NOT_READY = 11,    /* hrx_completion_status: the run has not finished */
  HRX_E_CALLBACK = 12      /* a host callback or host kernel returned a failure */
} hrx_status;

/* Returns a static, human-readable name for a status ("HRX_E_BUSY"); never NULL, also for
 * values this version does not know. Thread-safe. */
HRX_API const char *hrx_status_name(hrx_status status);

/* Returns the calling thread's message for the last failed hrx call ("" if none). The string
 * is owned by hrx and stays valid until the next hrx call on this thread. Thread-safe: each
 * thread has its own message. */
HRX_API const char *hrx_last_error(void);

/* Returns the library version as "major.minor.patch", a static string. Thread-safe. */
HRX_API const char *hrx_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Runtime                                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* An hrx runtime: one engine over one device, its scheduler threads, counters and caches. */
typedef struct hrx_runtime hrx_runtime;

/* Engines. Append-only. HRX_ENGINE_NPU is reserved for the seed's NPU engine, which does not
 * exist on this hardware: creating a runtime for it fails with HRX_E_UNSUPPORTED. */
typedef enum hrx_engine {
  HRX_ENGINE_HOST = 0, /* host threads stand in for the GPU; every rule is kept */
  HRX_ENGINE_CUDA = 1, /* one CUDA device through the runtime API */
  HRX_ENGINE_NPU = 2   /* reserved; unsupported */
} hrx_engine;

/* Runtime options. Initialize with hrx_runtime_options_init, then change fields. */
typedef struct hrx_runtime_options {
  hrx_engine engine;     /* default HRX_ENGINE_HOST */
  int device_index;      /* CUDA device ordinal; default 0 */
  uint32_t graph_slots;  /* run slots per prepared graph (1..1024); default 2 */
  uint32_t capacity;     /* submissions in flight across the runtime (1..65536); default 256 */
} hrx_runtime_options;

/* Fills *options with the defaults listed in hrx_runtime_options. Does nothing if options is
 * NULL. Thread-safe. */
HRX_API void hrx_runtime_options_init(hrx_runtime_options *options);

/* Creates a runtime (options may be NULL for the defaults); *out receives a new reference.
 * Fails with HRX_E_INVALID for bad options, HRX_E_UNSUPPORTED for the NPU engine or for the
 * CUDA engine in a build without CUDA, HRX_E_NO_DEVICE where no CUDA device or driver is
 * present, HRX_E_OUT_OF_MEMORY or HRX_E_CUDA otherwise. Thread-safe. */
HRX_API hrx_status hrx_runtime_create(const hrx_runtime_options *options, hrx_runtime **out);

/* Adds a reference to runtime (NULL-safe) and returns it. Thread-safe. */
HRX_API hrx_runtime *hrx_runtime_retain(hrx_runtime *runtime);

/* Drops a reference (NULL-safe). Buffers, kernels, graphs and prepared graphs hold their own
 * references, and so does every run in flight, so the runtime (its threads, streams and the
 * resources quarantined after native failures) is torn down only once all of them are gone.
 * Completions hold only a weak link and may outlive it. Thread-safe. */
HRX_API void hrx_runtime_release(hrx_runtime *runtime);

/* Returns the engine the runtime was created with. Thread-safe. */
HRX_API hrx_engine hrx_runtime_engine(const hrx_runtime *runtime);

/* Returns HRX_OK while the runtime is healthy, or HRX_E_DEVICE_LOST once an error that
 * poisons the whole CUDA context (an illegal or misaligned address, a trap, ...) or an
 * injected runtime fault has failed it; the last-error message then holds the cause. Every
 * later call on the runtime or its objects reports the same. Thread-safe. */
HRX_API hrx_status hrx_runtime_health(hrx_runtime *runtime);

/* Counters, all monotonic since creation. */
typedef struct hrx_counters {
  uint64_t submissions;            /* accepted submissions only */
  uint64_t native_graphs_prepared; /* native graphs instantiated: one per native region */
  uint64_t native_graphs_updated;  /* native graphs updated in place by hrx_prepared_update */
  uint64_t copy_streams_created;   /* cached per-lane copy streams created (at most 3) */
  uint64_t lane_copy_bytes[3];     /* bytes copied per lane (hrx_lane), on success */
  uint64_t copied_bytes;           /* bytes copied over all lanes, on success */
  uint64_t regions_failed;         /* regions that failed when they ran */
  uint64_t quarantined_callbacks;  /* scoped callbacks quarantined with their resources */
  uint64_t gpu_event_waits;        /* region dependencies kept on the GPU with events (the
                                      predecessor was still running; no host wait) */
} hrx_counters;

/* Copies the runtime's counters into *out. Fails with HRX_E_INVALID on NULL arguments.
 * Thread-safe; the copy is consistent per field, not across fields. */
HRX_API hrx_status hrx_runtime_counters(hrx_runtime *runtime, hrx_counters *out);

/* Fault injection, for tests here and in the CUDA backend. */
typedef enum hrx_fault {
  /* The next region to start fails as a native failure of its kind: a native region
   * quarantines its prepared graph and poisons the buffers it writes; a copy region
   * quarantines its lane's copy stream; a scoped callback region is quarantined with its
   * resources; a host callback region fails its run. */
  HRX_FAULT_NEXT_REGION = 0,
  /* The next region to start fails the whole runtime, as a context-poisoning CUDA error does. */
  HRX_FAULT_RUNTIME = 1
} hrx_fault;

/* Arms one fault of the given kind; several calls arm several faults, used one per region in
 * the order regions start. Fails with HRX_E_INVALID for an unknown kind. Thread-safe. */
HRX_API hrx_status hrx_runtime_inject_fault(hrx_runtime *runtime, hrx_fault fault);

/* Blocks until every run submitted so far on the runtime has finished (successfully or not).
 * Returns the runtime's health. Thread-safe. Fails with HRX_E_INVALID when called from a
 * callback of the same runtime (it would wait for itself). */
HRX_API hrx_status hrx_runtime_drain(hrx_runtime *runtime);

/* ---------------------------------------------------------------------------------------- */
/* Buffers and views                                                                           */
/* ---------------------------------------------------------------------------------------- */

/* A buffer: one allocation owned by one runtime. */
typedef struct hrx_buffer hrx_buffer;

/* Where a buffer lives. Append-only. */
typedef enum hrx_memory {
  HRX_MEMORY_DEVICE = 0,       /* device-local; visible to the GPU, not mappable */
  HRX_MEMORY_HOST_VISIBLE = 1, /* pinned host memory; visible to the GPU and mappable */
  HRX_MEMORY_HOST_ONLY = 2     /* pageable host memory; host callbacks only, not GPU-visible */
} hrx_memory;

/* Kinds of access an operation declares for a binding, and kinds of host mapping. */
typedef enum hrx_access {
  HRX_ACCESS_READ = 1,
  HRX_ACCESS_WRITE = 2,
  HRX_ACCESS_READ_WRITE = 3
} hrx_access;

/* The engine that last wrote a buffer. */
typedef enum hrx_writer {
  HRX_WRITER_NONE = 0, /* never written since creation */
  HRX_WRITER_HOST = 1, /* host callbacks, host mappings for writing, host-engine work */
  HRX_WRITER_GPU = 2   /* CUDA work: native graphs, copies, scoped callbacks */
} hrx_writer;

/* Creates a buffer of `bytes` bytes (1 byte at least), zero-filled, on the runtime; *out gets
 * a new reference, which also keeps the runtime alive. Fails with HRX_E_INVALID (bad kind or
 * size), HRX_E_OUT_OF_MEMORY, HRX_E_DEVICE_LOST (failed runtime) or HRX_E_CUDA. Thread-safe. */
HRX_API hrx_status hrx_buffer_create(hrx_runtime *runtime, hrx_memory memory, size_t bytes,
                                     hrx_buffer **out);

/* Adds a reference (NULL-safe) and returns buffer. Thread-safe. */
HRX_API hrx_buffer *hrx_buffer_retain(hrx_buffer *buffer);

/* Drops a reference (NULL-safe). Graphs, prepared graphs and runs in flight that use the
 * buffer hold their own references, so memory is freed only when no work can touch it.
 * Thread-safe. */
HRX_API void hrx_buffer_release(hrx_buffer *buffer);

/* Returns the size in bytes (0 for NULL). Thread-safe. */
HRX_API size_t hrx_buffer_size(const hrx_buffer *buffer);

/* Returns the memory kind. Thread-safe. */
HRX_API hrx_memory hrx_buffer_memory(const hrx_buffer *buffer);

/* Returns the engine that last wrote the buffer, as recorded after each successful region.
 * Thread-safe. */
HRX_API hrx_writer hrx_buffer_last_writer(hrx_buffer *buffer);

/* Writes the buffer's GPU address (the allocation address kernels see; alignment checks use
 * it plus the view offset) into *out. Fails with HRX_E_INVALID for HRX_MEMORY_HOST_ONLY
 * buffers, which the GPU cannot see. Thread-safe. */
HRX_API hrx_status hrx_buffer_gpu_address(hrx_buffer *buffer, uint64_t *out);

/* Returns HRX_OK if the buffer is not poisoned, else HRX_E_DEVICE_LOST with the poison
 * message (which names the failed work) as the last error. A buffer is poisoned when native
 * work that writes it fails; every later region and submit that uses it then fails. */
HRX_API hrx_status hrx_buffer_check(hrx_buffer *buffer);

/* Maps a host-visible or host-only buffer for host access and writes its host address into
 * *out. Mappings nest and are counted per access kind. Fails with HRX_E_INVALID for device
 * buffers or a bad access, and with HRX_E_BUSY while an unfinished submission conflicts: a
 * read mapping conflicts with pending writes, a write mapping with any pending use. While a
 * mapping is live, submitting GPU work that writes the buffer, or reads one mapped for
 * writing, fails with HRX_E_BUSY. A write mapping records the host as the last writer.
 * Thread-safe. */
HRX_API hrx_status hrx_buffer_map(hrx_buffer *buffer, hrx_access access, void **out);

/* Ends one mapping of the given access kind made by hrx_buffer_map. Fails with HRX_E_INVALID
 * if no such mapping is live. Thread-safe. */
HRX_API hrx_status hrx_buffer_unmap(hrx_buffer *buffer, hrx_access access);

/* A view: a byte range of a buffer. A plain value; the buffer is borrowed, and operations
 * recorded on a view take their own reference to its buffer. */
typedef struct hrx_view {
  hrx_buffer *buffer;
  size_t offset;
  size_t length;
} hrx_view;

/* Returns the view (buffer, offset, length). No validation: recording checks the range. */
HRX_API hrx_view hrx_view_make(hrx_buffer *buffer, size_t offset, size_t length);

/* Returns the view of the whole buffer. */
HRX_API hrx_view hrx_view_whole(hrx_buffer *buffer);

/* Returns 1 if both views are of the same buffer and their byte ranges intersect, else 0.
 * Empty views overlap nothing. */
HRX_API int hrx_view_overlaps(hrx_view a, hrx_view b);

/* ---------------------------------------------------------------------------------------- */
/* Kernels                                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* A trusted kernel with fixed launch dimensions and a contract, bound to one runtime. */
typedef struct hrx_kernel hrx_kernel;

/* One binding of a kernel contract: the access the kernel makes, the alignment the GPU address
 * (allocation address plus view offset) must have, and the exact view length in bytes. */
typedef struct hrx_binding_contract {
  hrx_access access;
  uint32_t alignment; /* a power of two, 1 at least */
  size_t extent;      /* required view length in bytes, 1 at least */
} hrx_binding_contract;

/* One scalar kernel constant: 4 or 8 bytes, passed by value after the bindings. */
typedef struct hrx_constant {
  uint32_t size; /* 4 or 8 */
  union {
    uint32_t u32;
    int32_t i32;
    float f32;
    uint64_t u64;
    int64_t i64;
    double f64;
  } value;
} hrx_constant;

/* A kernel contract. The kernel's parameters are, in order, one pointer per binding and then
 * each constant by value; `constants` are the defaults a dispatch uses unless it passes its
 * own (of the same count and sizes). */
typedef struct hrx_kernel_contract {
  const hrx_binding_contract *bindings;
  size_t binding_count;
  const hrx_constant *constants;
  size_t constant_count;
} hrx_kernel_contract;

/* Arguments of one host-engine kernel invocation: binding host addresses and lengths in
 * contract order, the dispatch's constants, and the kernel's fixed grid and block. */
typedef struct hrx_host_launch {
  void *const *bindings;
  const size_t *lengths;
  size_t binding_count;
  const hrx_constant *constants;
  size_t constant_count;
  uint32_t grid[3];
  uint32_t block[3];
  const void *params; /* the dispatch's by-value parameter block (hrx_graph_dispatch_ex) */
  size_t params_size;
} hrx_host_launch;

/* A host-engine kernel body. Returns HRX_OK, or any other status to report a native failure
 * (its graph is quarantined and the buffers it writes are poisoned). Runs on an hrx worker. */
typedef hrx_status (*hrx_host_kernel_fn)(const hrx_host_launch *launch, void *user);

/* Creates a kernel for a HRX_ENGINE_HOST runtime from a C function; `user` is borrowed and
 * must outlive the kernel. The contract is copied. Fails with HRX_E_INVALID for a bad
 * contract, zero dimensions, or a runtime of another engine. Thread-safe. */
HRX_API hrx_status hrx_kernel_create_host(hrx_runtime *runtime,
                                          const hrx_kernel_contract *contract,
                                          const uint32_t grid[3], const uint32_t block[3],
                                          hrx_host_kernel_fn fn, void *user, hrx_kernel **out);

/* Creates a kernel for a HRX_ENGINE_CUDA runtime from a PTX text (NUL-terminated) or a cubin
 * image (`image`, `image_size` bytes; image_size 0 means NUL-terminated PTX) and the entry
 * point's name. The contract is copied. Fails with HRX_E_INVALID (bad contract or dimensions,
 * missing entry), HRX_E_UNSUPPORTED (host runtime or a build without CUDA) or HRX_E_CUDA
 * (the driver rejected the image; its message is kept). Thread-safe. */
HRX_API hrx_status hrx_kernel_create_image(hrx_runtime *runtime, const void *image,
                                           size_t image_size, const char *entry,
                                           const hrx_kernel_contract *contract,
                                           const uint32_t grid[3], const uint32_t block[3],
                                           hrx_kernel **out);

/* Compiles CUDA C source with NVRTC for the runtime's device (extern "C" entry points are
 * found by their plain name) and creates a kernel as hrx_kernel_create_image does. `options`
 * (may be NULL when option_count is 0) are passed to NVRTC after hrx's own architecture
 * option. Fails with HRX_E_COMPILE carrying NVRTC's log, or as hrx_kernel_create_image.
 * Thread-safe. */
HRX_API hrx_status hrx_kernel_create_source(hrx_runtime *runtime, const char *source,
                                            const char *entry, const char *const *options,
                                            size_t option_count,
                                            const hrx_kernel_contract *contract,
                                            const uint32_t grid[3], const uint32_t block[3],
                                            hrx_kernel **out);

/* Creates a kernel for a HRX_ENGINE_CUDA runtime from a `__global__` function compiled into
 * the program by nvcc (`func` is the function's host-side address, as given to
 * cudaLaunchKernel). Its parameters are one pointer per contract binding, then each constant,
 * then, when `params_size` is nonzero, one by-value parameter block of exactly that many bytes
 * (a plain struct, given per dispatch to hrx_graph_dispatch_ex). `shared_bytes` of dynamic
 * shared memory are requested per launch (above 48 KiB the caller must have raised the
 * function's limit with cudaFuncSetAttribute). Fails with HRX_E_INVALID (NULL func, bad
 * contract or dimensions, a params block over 4096 bytes), HRX_E_UNSUPPORTED (host runtime or
 * a build without CUDA). Thread-safe. */
HRX_API hrx_status hrx_kernel_create_function(hrx_runtime *runtime, const void *func,
                                              const hrx_kernel_contract *contract,
                                              size_t params_size, uint32_t shared_bytes,
                                              const uint32_t grid[3], const uint32_t block[3],
                                              hrx_kernel **out);

/* Adds a reference (NULL-safe) and returns kernel. Thread-safe. */
HRX_API hrx_kernel *hrx_kernel_retain(hrx_kernel *kernel);

/* Drops a reference (NULL-safe). Graphs using the kernel keep it alive. Thread-safe. */
HRX_API void hrx_kernel_release(hrx_kernel *kernel);

/* Returns the kernel's contract; its arrays are owned by the kernel and live as long as it.
 * Thread-safe. */
HRX_API const hrx_kernel_contract *hrx_kernel_contract_of(const hrx_kernel *kernel);

/* ---------------------------------------------------------------------------------------- */
/* Graph builder                                                                               */
/* ---------------------------------------------------------------------------------------- */

/* A graph builder: records operations with their declared accesses. Not thread-safe: one
 * thread at a time may record into one builder. */
typedef struct hrx_graph hrx_graph;

/* Independent scheduling lanes. Memory hazards apply across every lane. */
typedef enum hrx_lane {
  HRX_LANE_UPLOAD = 0,   /* host-to-device transfers */
  HRX_LANE_COMPUTE = 1,  /* kernels, fills, device-to-device copies; the default */
  HRX_LANE_DOWNLOAD = 2  /* device-to-host transfers */
} hrx_lane;

/* A declared access of a callback to a view. */
typedef struct hrx_binding {
  hrx_view view;
  hrx_access access;
} hrx_binding;

/* What a callback receives for each binding: the address it may use (a GPU address for
 * scoped callbacks on the CUDA engine and for captured operations, a host address otherwise)
 * and the length. */
typedef struct hrx_callback_view {
  void *address;
  size_t length;
} hrx_callback_view;

/* A scoped native callback: runs the caller's own GPU work (cuBLASLt, NCCL, ...) over the
 * views in declaration order. It must access the views only as declared, synchronize every
 * stream it used before returning, and keep no pointer. Returning anything but HRX_OK is an
 * uncertain failure: hrx then quarantines the callback with its user data and bindings (kept
 * alive until the runtime is torn down) and poisons the buffers it writes. */
typedef hrx_status (*hrx_scoped_fn)(const hrx_callback_view *views, size_t count, void *user);

/* A host callback: runs host code over host-visible or host-only views. A failure fails its
 * run (dependents are cancelled) without quarantine. */
typedef hrx_status (*hrx_host_fn)(const hrx_callback_view *views, size_t count, void *user);

/* Releases a callback's user data; called once, when no run can use it any more. */
typedef void (*hrx_destroy_fn)(void *user);

/* Creates an empty builder for the runtime; *out gets a new reference. Fails with
 * HRX_E_DEVICE_LOST for a failed runtime. Thread-safe. */
HRX_API hrx_status hrx_graph_create(hrx_runtime *runtime, hrx_graph **out);

/* Drops the builder (NULL-safe) with every reference it holds. */
HRX_API void hrx_graph_release(hrx_graph *graph);

/* Returns the number of operations recorded so far. */
HRX_API size_t hrx_graph_size(const hrx_graph *graph);

/* Records a fill of `dst` with the byte `value` (write access) and writes the operation's
 * index into *out_index (may be NULL). Fails with HRX_E_INVALID if dst is out of range, empty,
 * of another runtime ("buffer belongs to another runtime") or not GPU-visible. */
HRX_API hrx_status hrx_graph_fill(hrx_graph *graph, hrx_view dst, uint8_t value,
                                  size_t *out_index);

/* Records a copy from src to dst; the lane follows from the endpoints: host-visible to device
 * is HRX_LANE_UPLOAD, device to host-visible HRX_LANE_DOWNLOAD, anything else
 * HRX_LANE_COMPUTE. Fails with HRX_E_INVALID for out-of-range, unequal or overlapping views
 * ("copy needs equal, nonoverlapping ranges"), views of another runtime, or views the GPU
 * cannot see. */
HRX_API hrx_status hrx_graph_copy(hrx_graph *graph, hrx_view dst, hrx_view src,
                                  size_t *out_index);

/* Records a copy on an explicit lane, with the same checks and cross-lane hazards as
 * hrx_graph_copy. Fails with HRX_E_INVALID also for an unknown lane. */
HRX_API hrx_status hrx_graph_copy_on(hrx_graph *graph, hrx_view dst, hrx_view src,
                                     hrx_lane lane, size_t *out_index);

/* Records a dispatch of `kernel` over `views` (one per contract binding) with the given
 * constants (NULL to use the contract's defaults). Checks: kernel and buffers of this runtime,
 * binding count, exact extents, GPU visibility, alignment of allocation address plus offset
 * ("GPU allocation does not satisfy kernel alignment"), constant count and sizes, and no
 * overlapping bindings where one is written. Fails with HRX_E_INVALID naming the binding. */
HRX_API hrx_status hrx_graph_dispatch(hrx_graph *graph, hrx_kernel *kernel,
                                      const hrx_view *views, size_t view_count,
                                      const hrx_constant *constants, size_t constant_count,
                                      size_t *out_index);

/* As hrx_graph_dispatch, but writable bindings may alias: the kernel must be correct for the
 * overlapping ranges. Every other check is kept. */
HRX_API hrx_status hrx_graph_dispatch_aliasing(hrx_graph *graph, hrx_kernel *kernel,
                                               const hrx_view *views, size_t view_count,
                                               const hrx_constant *constants,
                                               size_t constant_count, size_t *out_index);

/* Flags for hrx_graph_dispatch_ex. */
enum { HRX_DISPATCH_ALIASING = 1 /* writable bindings may alias (as _aliasing) */ };

/* As hrx_graph_dispatch, with a by-value parameter block: `params` (`params_size` bytes, which
 * must equal the kernel's params_size; copied) is passed after the constants. Parameter blocks
 * take part in update-in-place like constants. With HRX_DISPATCH_ALIASING writable bindings may
 * alias. Fails as hrx_graph_dispatch, and with HRX_E_INVALID for a parameter block of the
 * wrong size. */
HRX_API hrx_status hrx_graph_dispatch_ex(hrx_graph *graph, hrx_kernel *kernel,
                                         const hrx_view *views, size_t view_count,
                                         const hrx_constant *constants, size_t constant_count,
                                         const void *params, size_t params_size, uint32_t flags,
                                         size_t *out_index);

/* Records a scoped native callback with declared accesses; it always forms a region of its
 * own, runs on an hrx worker (never inside hrx_completion_poll), and its runs are serialized.
 * Ownership of `user` passes to hrx on success (destroy, if not NULL, releases it; on failure
 * of this call the caller keeps it). Fails with HRX_E_INVALID for a NULL fn, an unknown access,
 * out-of-range views, views of another runtime, or views the GPU cannot see. */
HRX_API hrx_status hrx_graph_scoped(hrx_graph *graph, const hrx_binding *bindings,
                                    size_t binding_count, hrx_scoped_fn fn, void *user,
                                    hrx_destroy_fn destroy, size_t *out_index);

/* A captured operation's function: enqueues the caller's own GPU work (cuBLASLt, a kernel
 * launch, ...) over the views, in declaration order, on `stream` (a cudaStream_t, passed as a
 * pointer so that this header stays free of CUDA), and returns. hrx calls it while `stream` is
 * being captured into a CUDA graph (cudaStreamCaptureModeThreadLocal), on the thread that
 * prepares or updates the graph and never when a run is submitted: it may only enqueue work,
 * so no synchronization, no allocation, no query of work in flight, nothing else that stream
 * capture forbids; other streams only forked from `stream` with events and joined back. It
 * must access the views only as declared and keep no pointer; a failure it returns fails the
 * hrx_graph_prepare or hrx_prepared_update that called it. */
typedef hrx_status (*hrx_capture_fn)(const hrx_callback_view *views, size_t count, void *stream,
                                     void *user);

/* Records a captured operation with declared accesses. Unlike a scoped callback it is a
 * native operation of the compute lane, as a kernel dispatch is: it joins the native region
 * around it instead of forming its own, and hrx_graph_prepare calls fn once under stream
 * capture and embeds the captured work as a child graph whose edges follow from the declared
 * accesses, so a region of kernels and captured operations is one CUDA graph launch with no
 * host round trip. hrx_prepared_update calls fn again for a captured operation whose views,
 * fn or user differ, and re-instantiates the region if the captured work's shape changed.
 * Ownership of `user` as for hrx_graph_scoped; it must stay valid for fn until destroy is
 * called, once no prepare or update can call fn any more. Fails with HRX_E_UNSUPPORTED on the
 * host engine ("captured operations need the CUDA engine"), and with HRX_E_INVALID as
 * hrx_graph_scoped: a NULL fn, an unknown access, out-of-range views, views of another runtime,
 * or views the GPU cannot see. */
HRX_API hrx_status hrx_graph_captured(hrx_graph *graph, const hrx_binding *bindings,
                                      size_t binding_count, hrx_capture_fn fn, void *user,
                                      hrx_destroy_fn destroy, size_t *out_index);

/* As hrx_graph_captured, with a key: `key_size` bytes (copied; 0 for none) that stand for the
 * work fn enqueues apart from the views. Two captured operations with the same fn, the same key
 * and the same views are taken to enqueue the same work, whatever their user data: an update
 * (or an identical builder, HRX_UPDATE_UNCHANGED) keeps the work captured before instead of
 * calling fn again, and the new user data is dropped with the builder. Without a key, only the
 * same user pointer counts as the same work. */
HRX_API hrx_status hrx_graph_captured_keyed(hrx_graph *graph, const hrx_binding *bindings,
                                            size_t binding_count, hrx_capture_fn fn, void *user,
                                            hrx_destroy_fn destroy, const void *key,
                                            size_t key_size, size_t *out_index);

/* Records a host callback with declared accesses, a region of its own run on an hrx host
 * worker after its producers finished. Ownership of `user` as for hrx_graph_scoped. Fails
 * with HRX_E_INVALID for a NULL fn, out-of-range views, views of another runtime, or device
 * views the host cannot see. */
HRX_API hrx_status hrx_graph_host(hrx_graph *graph, const hrx_binding *bindings,
                                  size_t binding_count, hrx_host_fn fn, void *user,
                                  hrx_destroy_fn destroy, size_t *out_index);

/* ---------------------------------------------------------------------------------------- */
/* Prepared graphs, submission, completions                                                    */
/* ---------------------------------------------------------------------------------------- */

/* A prepared graph: regions lowered to native graphs or copy lists, with run slots. */
typedef struct hrx_prepared hrx_prepared;

/* An observer of one submitted run. Holding it keeps its run slot from being reused. */
typedef struct hrx_completion hrx_completion;

/* Prepares a builder: splits it into regions (consecutive same-lane operations; each scoped
 * or host callback alone, captured operations inside their region), lowers each mixed region
 * to one native graph instantiated once, sends copy-only regions to the lane's cached copy
 * stream, infers edges from overlapping accesses and reserves the runtime's graph_slots run
 * slots. On success the builder is consumed (released) and *out gets a new reference; on
 * failure the builder is untouched. Fails with HRX_E_INVALID ("cannot prepare an empty
 * graph"), HRX_E_DEVICE_LOST, HRX_E_CUDA or HRX_E_OUT_OF_MEMORY, or with the status a captured
 * operation's fn returned ("captured operation N ..." names it; HRX_E_CUDA when its capture
 * failed). Thread-safe for distinct builders. */
HRX_API hrx_status hrx_graph_prepare(hrx_graph *graph, hrx_prepared **out);

/* Adds a reference (NULL-safe) and returns prepared. Thread-safe. */
HRX_API hrx_prepared *hrx_prepared_retain(hrx_prepared *prepared);

/* Drops a reference (NULL-safe); runs in flight keep the graph alive. Thread-safe. */
HRX_API void hrx_prepared_release(hrx_prepared *prepared);

/* Returns the number of regions (a native region may hold many operations). */
HRX_API size_t hrx_prepared_regions(const hrx_prepared *prepared);

/* Returns 1 if some region does not depend on the region before it (the regions can overlap
 * in time), 0 for a pure chain. */
HRX_API int hrx_prepared_parallel(const hrx_prepared *prepared);

/* Writes region `region`'s lane into *lane and its operation count into *operations (either
 * may be NULL). Fails with HRX_E_INVALID for a region out of range. */
HRX_API hrx_status hrx_prepared_region_info(const hrx_prepared *prepared, size_t region,
                                            hrx_lane *lane, size_t *operations);

/* Writes into *out (up to `capacity` entries) the regions region `region` depends on, and
 * their number into *count (which may exceed capacity). Fails with HRX_E_INVALID for a region
 * out of range. */
HRX_API hrx_status hrx_prepared_region_deps(const hrx_prepared *prepared, size_t region,
                                            size_t *out, size_t capacity, size_t *count);

/* Writes into *out (up to `capacity` entries) the operations (builder indices) that operation
 * `index` depends on inside its region, and their number into *count. Fails with
 * HRX_E_INVALID for an index out of range. */
HRX_API hrx_status hrx_prepared_operation_deps(const hrx_prepared *prepared, size_t index,
                                               size_t *out, size_t capacity, size_t *count);

/* Returns 1 if the graph was quarantined after a native failure, else 0. */
HRX_API int hrx_prepared_quarantined(const hrx_prepared *prepared);

/* Submits one run of the prepared graph; same as hrx_submit_after with no dependencies. */
HRX_API hrx_status hrx_submit(hrx_prepared *prepared, hrx_completion **out);

/* Submits one run after the given producer completions; never blocks and never waits for the
 * device. Checks, in this order: the runtime is healthy; the graph is usable (not quarantined:
 * "graph quarantined after native failure"; no poisoned buffer: the poison message) →
 * HRX_E_DEVICE_LOST; each dependency belongs to this runtime ("completion belongs to another
 * runtime"; one whose runtime is gone is accepted only if complete, else "orphaned incomplete
 * producer") → HRX_E_INVALID; runtime capacity ("runtime submission capacity exhausted"), live
 * host mappings of buffers it uses, and a free slot ("prepared run slots are occupied; drop
 * completed observers or reserve more slots") → HRX_E_BUSY. The run is ordered after earlier
 * unfinished submissions whose accesses conflict with it; a failed or cancelled producer
 * cancels it even without overlap. *out gets a new completion reference. Thread-safe. */
HRX_API hrx_status hrx_submit_after(hrx_prepared *prepared, hrx_completion *const *deps,
                                    size_t dep_count, hrx_completion **out);

/* Flags for hrx_submit_after_ex. */
enum {
  /* Leave every launch to hrx's workers. Without it, the GPU regions of the run that are ready
   * at once are launched by the calling thread before it returns (no hand-over to a worker:
   * the least latency); with it the call returns sooner (the most throughput while the caller
   * records more work). */
  HRX_SUBMIT_DEFERRED = 1
};

/* As hrx_submit_after, with flags. Fails as it, and with HRX_E_INVALID for unknown flags. */
HRX_API hrx_status hrx_submit_after_ex(hrx_prepared *prepared, hrx_completion *const *deps,
                                       size_t dep_count, uint32_t flags, hrx_completion **out);

/* How hrx_prepared_update applied a new builder. */
typedef enum hrx_update_mode {
  HRX_UPDATE_IN_PLACE = 0,       /* same topology: native graphs updated in place */
  HRX_UPDATE_REINSTANTIATED = 1, /* topology differed (or was forced): rebuilt */
  HRX_UPDATE_UNCHANGED = 2       /* the builder held exactly the prepared operations (same
                                    kernels, views, constants, parameter blocks): nothing was
                                    rewritten, and runs in flight did not matter */
} hrx_update_mode;

/* Flags for hrx_prepared_update. */
enum { HRX_UPDATE_FORCE_REINSTANTIATE = 1 };

/* Rebuilds `prepared` from a builder of the same runtime with new views and constants. When
 * the topology is the same (operation kinds, kernels, lanes, region split and edges, checked
 * first) every native region is updated in place: the nodes of changed operations are
 * rewritten in the instantiated graph (captured operations captured again), and a region
 * whose nodes the driver refuses to change is instantiated again; otherwise, or with
 * HRX_UPDATE_FORCE_REINSTANTIATE, the graph is re-prepared. On success the builder is consumed
 * and *mode (may be NULL) says which happened; on failure `prepared` keeps its previous
 * operations. A builder identical to the prepared operations (no callbacks but the same ones)
 * changes nothing and succeeds at once with HRX_UPDATE_UNCHANGED, even while runs are in
 * flight. Fails with HRX_E_BUSY while a run is in flight or a completion of one is held (and
 * something would change), HRX_E_DEVICE_LOST for a quarantined graph or failed runtime, and
 * as hrx_graph_prepare. Thread-safe. */
HRX_API hrx_status hrx_prepared_update(hrx_prepared *prepared, hrx_graph *graph,
                                       uint32_t flags, hrx_update_mode *mode);

/* Adds a reference (NULL-safe) and returns completion. Thread-safe. */
HRX_API hrx_completion *hrx_completion_retain(hrx_completion *completion);

/* Drops a reference (NULL-safe). The run continues; its slot becomes reusable once the run
 * finished and every reference to its completion was released. Thread-safe. */
HRX_API void hrx_completion_release(hrx_completion *completion);

/* Waits until the run finished or `timeout_ns` passed (HRX_WAIT_FOREVER for no limit), and
 * returns the run's status: HRX_OK, the failure (with its message as last error),
 * HRX_E_CANCELLED, or HRX_E_TIMEOUT if it has not finished. Never runs work itself. Fails with
 * HRX_E_INVALID, instead of deadlocking, when called from a callback of the same runtime while
 * the run is unfinished. Thread-safe. */
HRX_API hrx_status hrx_completion_wait(hrx_completion *completion, uint64_t timeout_ns);
#define HRX_WAIT_FOREVER UINT64_MAX

/* Writes 1 into *done if the run finished, else 0. Never runs or waits for work.
 * Thread-safe. */
HRX_API hrx_status hrx_completion_poll(hrx_completion *completion, int *done);

/* Returns the run's final status if it finished (with its message as last error on failure),
 * else HRX_E_NOT_READY. Thread-safe. */
HRX_API hrx_status hrx_completion_status(hrx_completion *completion);

/* Asks to cancel the run: regions not yet started are skipped, the run finishes with
 * HRX_E_CANCELLED (unless it already finished), and runs that depend on it are cancelled too.
 * Work already issued to the device completes. Thread-safe. */
HRX_API hrx_status hrx_completion_cancel(hrx_completion *completion);

#ifdef __cplusplus
}
#endif

#endif /* HRX_H */
