/* File formats, C-side behaviours: arrays viewing a file mapping are never written (a
 * slice_update leaves the file untouched), mappings are released with their last array, the
 * typed metadata API, savers' atomic replacement, allocation failures, and every kind of bad
 * input as its own case (an NV_ERR_IO naming the file and the problem, never a crash). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "nuvec.h"

/* ---- Helpers ---- */

typedef struct blob {
  unsigned char *p;
  size_t n, cap;
} blob;

static void put(blob *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void put_str(blob *b, const char *s) { put(b, s, strlen(s)); }
static void put_u32(blob *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(blob *b, uint64_t v) { put(b, &v, 8); }
static void put_gstr(blob *b, const char *s) {
  put_u64(b, strlen(s));
  put_str(b, s);
}
static void pad_to(blob *b, size_t align) {
  while (b->n % align) put(b, "", 1);
}

static char tmpdir[64];

static void setup_dir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/nuvec_io_test.XXXXXX");
  cr_assert(mkdtemp(tmpdir));
}

static void teardown_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static const char *path_in(const char *name) {
  static char buf[4][256];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 256, "%s/%s", tmpdir, name);
  return p;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  cr_assert_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(*n + 1);
  cr_assert_eq(fread(p, 1, *n, f), *n);
  fclose(f);
  return p;
}

/* A safetensors file from a header text and data. */
static blob st_blob(const char *json, const void *data, size_t n) {
  blob b = {0};
  put_u64(&b, strlen(json));
  put_str(&b, json);
  if (n) put(&b, data, n);
  return b;
}

/* Expects a safetensors blob to fail with `status` and a message containing `what`. */
static void st_bad(blob b, nv_status status, const char *what) {
  const char *path = path_in("bad.safetensors");
  write_file(path, b.p, b.n);
  nv_map *m = NULL;
  nv_io_metadata *md = NULL;
  cr_assert_eq(nv_load_safetensors(path, &m, &md), status, "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), "bad.safetensors"), "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), what), "expected \"%s\" in: %s", what, nv_last_error());
  cr_assert_null(m);
  cr_assert_eq(nv_load_safetensors_from_memory(b.p, b.n, &m, &md), status);
  cr_assert(strstr(nv_last_error(), "<memory>"));
  free(b.p);
}

static void npy_bad(const char *header, size_t data_bytes, nv_status status, const char *what) {
  blob b = {0};
  put(&b, "\x93NUMPY\x01\x00", 8);
  uint16_t hl = (uint16_t)strlen(header);
  put(&b, &hl, 2);
  put_str(&b, header);
  for (size_t i = 0; i < data_bytes; i++) put(&b, "\x01", 1);
  const char *path = path_in("bad.npy");
  write_file(path, b.p, b.n);
  nv_array *x = NULL;
  cr_assert_eq(nv_load_npy(path, &x), status, "%s: %s", header, nv_last_error());
  cr_assert(strstr(nv_last_error(), "bad.npy"), "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), what), "expected \"%s\" in: %s", what, nv_last_error());
  cr_assert_null(x);
  free(b.p);
}

/* ---- Mapped arrays are read-only ---- */

TestSuite(io_mapped, .init = setup_dir, .fini = teardown_dir);

Test(io_mapped, slice_update_of_mapped_array_leaves_file_untouched) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  /* The header is padded to 8 bytes so the data is aligned and can be mapped without a copy. */
  char json[128];
  snprintf(json, sizeof json, "%-64s",
           "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}");
  blob b = st_blob(json, data, sizeof data);
  cr_assert_eq((b.n - sizeof data) % 8, 0);
  const char *path = path_in("m.safetensors");
  write_file(path, b.p, b.n);
  nv_map *m;
  cr_assert_eq(nv_load_safetensors(path, &m, NULL), NV_OK, "%s", nv_last_error());
  nv_array *w = nv_map_get(m, "w");
  cr_assert_eq(nv__out(w)->buf->kind, NV__BUF_MAPPED, "the aligned tensor is a zero-copy view");
  /* The last reference to `w` goes to the op: donation would be allowed for a pool buffer. */
  nv_array *w2 = nv_retain(w);
  nv_map_free(m);
  float upd = 100;
  nv_array *u = nv_array_from_data(&upd, NULL, 0, NV_DTYPE_FLOAT32);
  int start[2] = {0, 1}, stop[2] = {2, 3};
  nv_array *y = nv_slice_update(w2, u, start, stop, NULL, 2);
  nv_release(w2);
  nv_release(u);
  float got[6];
  cr_assert_eq(nv_array_read(y, got, sizeof got), NV_OK, "%s", nv_last_error());
  float want[6] = {1, 100, 100, 4, 100, 100};
  for (int i = 0; i < 6; i++) cr_assert_eq(got[i], want[i]);
  cr_assert_neq(nv__out(y)->buf->kind, NV__BUF_MAPPED);
  nv_release(y);
  size_t n;
  unsigned char *after = read_file(path, &n);
  cr_assert_eq(n, b.n);
  cr_assert_eq(memcmp(after, b.p, n), 0, "the file changed");
  free(after);
  free(b.p);
}

Test(io_mapped, mapping_lives_until_last_array) {
  long before = nv__test_live_buffers();
  int32_t data[4] = {7, 8, 9, 10};
  blob b = st_blob("{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                   data, sizeof data);
  const char *path = path_in("two.safetensors");
  write_file(path, b.p, b.n);
  free(b.p);
  nv_map *m;
  cr_assert_eq(nv_load_safetensors(path, &m, NULL), NV_OK, "%s", nv_last_error());
  nv_array *bb = nv_retain(nv_map_get(m, "b"));
  nv_map_free(m);
  /* Replacing the file does not disturb the mapping (savers rename a new file into place). */
  nv_map *m2 = nv_map_new();
  nv_array *z = nv_zeros((int[]){3}, 1, NV_DTYPE_INT8);
  nv_map_set(m2, "z", z);
  nv_release(z);
  cr_assert_eq(nv_save_safetensors(path, m2, NULL), NV_OK, "%s", nv_last_error());
  nv_map_free(m2);
  int32_t got[2];
  cr_assert_eq(nv_array_read(bb, got, sizeof got), NV_OK);
  cr_assert_eq(got[0], 9);
  cr_assert_eq(got[1], 10);
  nv_release(bb);
  cr_assert_eq(nv__test_live_buffers(), before);
}

Test(io_mapped, npy_fortran_order_is_a_column_major_view) {
  /* A 2x3 float64 array in Fortran order (memory holds the columns), header padded so the
   * data starts at byte 128. */
  char hdr[119];
  snprintf(hdr, sizeof hdr, "%-117s\n", "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }");
  blob b = {0};
  put(&b, "\x93NUMPY\x01\x00", 8);
  uint16_t hl = 118;
  put(&b, &hl, 2);
  put_str(&b, hdr);
  double cols[6] = {1, 4, 2, 5, 3, 6};
  put(&b, cols, sizeof cols);
  cr_assert_eq(b.n, 128 + sizeof cols);
  const char *path = path_in("f.npy");
  write_file(path, b.p, b.n);
  free(b.p);
  nv_array *x;
  cr_assert_eq(nv_load_npy(path, &x), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__out(x)->buf->kind, NV__BUF_MAPPED);
  cr_assert(nv_array_is_col_contiguous(x));
  cr_assert_eq(nv_array_strides(x)[0], 1);
  cr_assert_eq(nv_array_strides(x)[1], 2);
  double got[6];
  cr_assert_eq(nv_array_read(x, got, sizeof got), NV_OK);
  for (int i = 0; i < 6; i++) cr_assert_eq(got[i], i + 1);
  nv_release(x);
}

Test(io_mapped, unaligned_tensor_is_copied) {
  /* An unpadded header puts a float32 at an odd address: it is copied, not mapped. */
  float data[1] = {2.5f};
  blob b = st_blob("{\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", data, 4);
  cr_assert_neq((b.n - 4) % 4, 0);
  const char *path = path_in("u.safetensors");
  write_file(path, b.p, b.n);
  free(b.p);
  nv_map *m;
  cr_assert_eq(nv_load_safetensors(path, &m, NULL), NV_OK, "%s", nv_last_error());
  nv_array *x = nv_map_get(m, "x");
  cr_assert_eq(nv__out(x)->buf->kind == NV__BUF_MAPPED, false);
  float v;
  cr_assert_eq(nv_array_item_float(x, &v), NV_OK);
  cr_assert_eq(v, 2.5f);
  nv_map_free(m);
}

/* ---- Metadata API ---- */

Test(io_metadata, typed_values) {
  nv_io_metadata *m = nv_io_metadata_new();
  cr_assert_eq(nv_io_metadata_set_int(m, "a", NV_META_INT8, -5), NV_OK);
  cr_assert_eq(nv_io_metadata_set_int(m, "b", NV_META_UINT8, 300), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_io_metadata_set_int(m, "b", NV_META_FLOAT32, 1), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_io_metadata_set_uint64(m, "u", UINT64_MAX), NV_OK);
  cr_assert_eq(nv_io_metadata_set_float(m, "f", NV_META_FLOAT32, 0.1), NV_OK);
  cr_assert_eq(nv_io_metadata_set_string(m, "s", "x\0y", 3), NV_OK);
  const char *strs[2] = {"p", "qq"};
  cr_assert_eq(nv_io_metadata_set_string_array(m, "sa", strs, 2), NV_OK);
  int16_t arr[3] = {1, -2, 3};
  cr_assert_eq(nv_io_metadata_set_array(m, "ia", NV_META_INT16, arr, 3), NV_OK);
  cr_assert_eq(nv_io_metadata_size(m), 6);
  int64_t i;
  uint64_t u;
  double f;
  cr_assert_eq(nv_io_metadata_get_int(m, "a", &i), NV_OK);
  cr_assert_eq(i, -5);
  cr_assert_eq(nv_io_metadata_get_uint64(m, "a", &u), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_io_metadata_get_int(m, "u", &i), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_io_metadata_get_uint64(m, "u", &u), NV_OK);
  cr_assert_eq(u, UINT64_MAX);
  cr_assert_eq(nv_io_metadata_get_float(m, "f", &f), NV_OK);
  cr_assert_eq(f, (double)0.1f);
  cr_assert_eq(nv_io_metadata_get_float(m, "s", &f), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_io_metadata_get_int(m, "missing", &i), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "missing"));
  const char *s;
  size_t n;
  cr_assert_eq(nv_io_metadata_get_string(m, "s", &s, &n), NV_OK);
  cr_assert_eq(n, 3);
  cr_assert_eq(memcmp(s, "x\0y", 3), 0);
  nv_meta_type t;
  const void *vals;
  cr_assert_eq(nv_io_metadata_get_array(m, "sa", &t, &n, &vals), NV_OK);
  cr_assert_eq(t, NV_META_STRING);
  cr_assert_str_eq(((const char *const *)vals)[1], "qq");
  cr_assert_eq(nv_io_metadata_get_array(m, "ia", &t, &n, &vals), NV_OK);
  cr_assert_eq(((const int16_t *)vals)[1], -2);
  /* Replacing keeps the position; removing shifts. */
  cr_assert_eq(nv_io_metadata_set_bool(m, "a", true), NV_OK);
  cr_assert_str_eq(nv_io_metadata_key(m, 0), "a");
  cr_assert(nv_io_metadata_has(m, "a", &t));
  cr_assert_eq(t, NV_META_BOOL);
  cr_assert(nv_io_metadata_remove(m, "a"));
  cr_assert_str_eq(nv_io_metadata_key(m, 0), "u");
  cr_assert_not(nv_io_metadata_remove(m, "a"));
  nv_io_metadata_free(m);
  nv_io_metadata_free(NULL);
}

/* ---- Savers ---- */

TestSuite(io_save, .init = setup_dir, .fini = teardown_dir);

Test(io_save, failures_leave_no_file) {
  nv_map *m = nv_map_new();
  nv_array *c = nv_zeros((int[]){2}, 1, NV_DTYPE_COMPLEX64);
  nv_map_set(m, "c", c);
  cr_assert_eq(nv_save_gguf(path_in("x.gguf"), m, NULL), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "complex64"), "%s", nv_last_error());
  nv_io_metadata *md = nv_io_metadata_new();
  nv_io_metadata_set_int(md, "n", NV_META_INT32, 3);
  cr_assert_eq(nv_save_safetensors(path_in("x.safetensors"), m, md), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "not a string"), "%s", nv_last_error());
  nv_io_metadata_set_int(md, "general.alignment", NV_META_UINT32, 24);
  cr_assert_eq(nv_save_gguf(path_in("y.gguf"), m, md), NV_ERR_INVALID_ARGUMENT);
  /* A failed array: its error, and no file. */
  nv_array *bad = nv_reshape(c, (int[]){3}, 1);
  cr_assert_eq(nv_save(path_in("bad.npy"), bad), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "save"), "%s", nv_last_error());
  cr_assert_eq(nv_save(path_in("no/such/dir/a.npy"), c), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "no/such/dir/a.npy"), "%s", nv_last_error());
  nv_release(bad);
  nv_release(c);
  nv_map_free(m);
  nv_io_metadata_free(md);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\"", tmpdir);
  cr_assert_eq(system(cmd), 0, "the directory is not empty");
}

Test(io_save, extensions_are_appended_and_load_dispatches) {
  nv_array *x = nv_arange(0, 6, 1, NV_DTYPE_INT32);
  cr_assert_eq(nv_save(path_in("a"), x), NV_OK, "%s", nv_last_error());
  nv_map *m;
  nv_io_metadata *md;
  cr_assert_eq(nv_load(path_in("a.npy"), &m, &md), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_map_size(m), 1);
  cr_assert_eq(nv_array_size(nv_map_get(m, "arr_0")), 6);
  cr_assert_eq(nv_io_metadata_size(md), 0);
  nv_map_free(m);
  nv_io_metadata_free(md);
  cr_assert_eq(nv_load(path_in("a.txt"), &m, &md), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "extension"));
  cr_assert_eq(nv_load(path_in("missing.npy"), &m, &md), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "missing.npy"));
  cr_assert_eq(nv_load(tmpdir, &m, NULL), NV_ERR_INVALID_ARGUMENT);
  nv_release(x);
}

Test(io_save, allocation_failures_fail_cleanly) {
  nv_map *m = nv_map_new();
  nv_array *x = nv_arange(0, 10, 1, NV_DTYPE_FLOAT32);
  nv_map_set(m, "x", x);
  nv_io_metadata *md = nv_io_metadata_new();
  nv_io_metadata_set_string(md, "k", "v", (size_t)-1);
  const char *path = path_in("oom.safetensors");
  const char *gpath = path_in("oom.gguf");
  cr_assert_eq(nv_save_safetensors(path, m, md), NV_OK);
  cr_assert_eq(nv_save_gguf(gpath, m, md), NV_OK);
  for (long k = 1; k < 40; k++) {
    nv_map *out = NULL;
    nv_io_metadata *om = NULL;
    nv__test_fail_alloc_at(k);
    nv_status st = nv_load_safetensors(path, &out, &om);
    nv__test_fail_alloc_at(0);
    cr_assert(st == NV_OK || st == NV_ERR_OUT_OF_MEMORY || st == NV_ERR_IO, "k=%ld: %d", k, st);
    nv_map_free(out);
    nv_io_metadata_free(om);
    out = NULL;
    om = NULL;
    nv__test_fail_alloc_at(k);
    st = nv_load_gguf(gpath, NV_GGUF_RAW, &out, &om);
    nv__test_fail_alloc_at(0);
    cr_assert(st == NV_OK || st == NV_ERR_OUT_OF_MEMORY || st == NV_ERR_IO, "k=%ld: %d", k, st);
    nv_map_free(out);
    nv_io_metadata_free(om);
  }
  nv_release(x);
  nv_map_free(m);
  nv_io_metadata_free(md);
}

/* ---- Bad .npy files ---- */

TestSuite(io_bad_npy, .init = setup_dir, .fini = teardown_dir);

Test(io_bad_npy, header_and_sizes) {
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 11, NV_ERR_IO,
          "declares 12 data bytes but the file holds 11");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 13, NV_ERR_IO,
          "holds 13");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12, NV_ERR_IO,
          "not a tuple");
  npy_bad("{'descr': '<f4', 'fortran_order': False, }", 0, NV_ERR_IO, "lacks 'shape'");
  npy_bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4,
          NV_ERR_IO, "twice");
  npy_bad("{'descr': '<f4', 'fortran_order': 1, 'shape': (), }", 4, NV_ERR_IO, "True or False");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", 4, NV_ERR_IO,
          "unexpected header key");
  npy_bad("{'descr': '<q9', 'fortran_order': False, 'shape': (), }", 4, NV_ERR_IO, "unknown dtype");
  npy_bad("{'descr': '<c16', 'fortran_order': False, 'shape': (), }", 16, NV_ERR_UNSUPPORTED,
          "no nuvec dtype");
  npy_bad("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", 4, NV_ERR_IO,
          "structured");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }", 0,
          NV_ERR_IO, "overflows");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
          NV_ERR_IO, "too large");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0, NV_ERR_IO, "tuple");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (), } junk", 4, NV_ERR_IO,
          "after the header");
  npy_bad("{'descr': '<f4 , 'fortran_order': False, 'shape': (), }", 4, NV_ERR_IO,
          "unknown dtype descr '<f4 , '");
  npy_bad("{'descr' '<f4', 'fortran_order': False, 'shape': (), }", 4, NV_ERR_IO,
          "malformed header: a header key has no ':'");
  npy_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (), ", 4, NV_ERR_IO,
          "malformed header");
  npy_bad("", 0, NV_ERR_IO, "not a dict");
  char many[1024] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; i++) strcat(many, "1,");
  strcat(many, "), }");
  npy_bad(many, 4, NV_ERR_IO, "more than 64");
}

Test(io_bad_npy, preamble) {
  unsigned char b[12] = "\x93NUMPX\x01\x00\x00\x00";
  nv_array *x = NULL;
  cr_assert_eq(nv_load_npy_from_memory(b, 10, &x), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "magic"));
  memcpy(b, "\x93NUMPY\x09\x00", 8);
  cr_assert_eq(nv_load_npy_from_memory(b, 10, &x), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "version 9"));
  memcpy(b, "\x93NUMPY\x01\x00\xff\x00", 10);
  cr_assert_eq(nv_load_npy_from_memory(b, 10, &x), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "header length 255 exceeds"));
  memcpy(b, "\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
  cr_assert_eq(nv_load_npy_from_memory(b, 12, &x), NV_ERR_IO);
  cr_assert_eq(nv_load_npy_from_memory(NULL, 0, &x), NV_ERR_IO);
  cr_assert_eq(nv_load_npy_from_memory(NULL, 5, &x), NV_ERR_INVALID_ARGUMENT);
  cr_assert_null(x);
  /* An empty file and a directory. */
  write_file(path_in("empty.npy"), "", 0);
  cr_assert_eq(nv_load_npy(path_in("empty.npy"), &x), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "empty.npy"));
  cr_assert_eq(nv_load_npy(tmpdir, &x), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "directory"));
}

/* ---- Bad safetensors files ---- */

TestSuite(io_bad_safetensors, .init = setup_dir, .fini = teardown_dir);

#define T1(dt, shape, off) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}}"

Test(io_bad_safetensors, header) {
  char data[64] = {1};
  blob b = {0};
  put_u64(&b, 1000);
  put_str(&b, "{}");
  st_bad(b, NV_ERR_IO, "header length 1000 exceeds");
  /* A header beyond the format's 100 MB limit, inside the buffer. */
  size_t huge = 200000000 + 8;
  unsigned char *z = calloc(1, huge);
  uint64_t hn = 200000000;
  memcpy(z, &hn, 8);
  nv_map *m = NULL;
  cr_assert_eq(nv_load_safetensors_from_memory(z, huge, &m, NULL), NV_ERR_IO);
  cr_assert(strstr(nv_last_error(), "limit"), "%s", nv_last_error());
  free(z);
  b = (blob){0};
  put(&b, "\x01\x02", 2);
  st_bad(b, NV_ERR_IO, "truncated");
  st_bad(st_blob("[]", NULL, 0), NV_ERR_IO, "not a JSON object");
  st_bad(st_blob("{\"t\":{}", NULL, 0), NV_ERR_IO, "malformed header");
  st_bad(st_blob("{\"t:{}}", NULL, 0), NV_ERR_IO, "unterminated string");
  st_bad(st_blob("{\"t\\q\":{}}", NULL, 0), NV_ERR_IO, "invalid escape");
  st_bad(st_blob("{\"t\\ud800\":{}}", NULL, 0), NV_ERR_IO, "invalid escape");
  st_bad(st_blob("{\"t\xff\":{}}", NULL, 0), NV_ERR_IO, "UTF-8");
  st_bad(st_blob("{\"t\xc0\x80\":{}}", NULL, 0), NV_ERR_IO, "UTF-8");
  st_bad(st_blob("{\"t\n\":{}}", NULL, 0), NV_ERR_IO, "control character");
  st_bad(st_blob("{\"t\\u0000\":" "{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", data, 1),
         NV_ERR_IO, "NUL");
  st_bad(st_blob("{} x", NULL, 0), NV_ERR_IO, "after the header");
  st_bad(st_blob("{\"t\":{\"dtype\":\"F32\"}}", NULL, 0), NV_ERR_IO, "lacks");
  st_bad(st_blob("{\"__metadata__\":{\"a\":1}}", NULL, 0), NV_ERR_IO, "expected a string");
  st_bad(st_blob("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", NULL, 0), NV_ERR_IO, "twice");
  st_bad(st_blob("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0), NV_ERR_IO, "twice");
}

Test(io_bad_safetensors, depth_bomb) {
  /* Unknown fields are skipped, but only to a bounded depth: no recursion bomb. */
  size_t n = 200000;
  char *j = malloc(n * 2 + 64);
  strcpy(j, "{\"t\":{\"x\":");
  size_t k = strlen(j);
  for (size_t i = 0; i < n; i++) j[k++] = '[';
  for (size_t i = 0; i < n; i++) j[k++] = ']';
  strcpy(j + k, "}}");
  st_bad(st_blob(j, NULL, 0), NV_ERR_IO, "nested too deeply");
  free(j);
  /* A shallow unknown field is fine. */
  char data[4] = {0};
  blob b = st_blob("{\"t\":{\"x\":[1,{\"y\":[true,null,-1.5e3]}],\"dtype\":\"U8\","
                   "\"shape\":[4],\"data_offsets\":[0,4]}}", data, 4);
  nv_map *m;
  cr_assert_eq(nv_load_safetensors_from_memory(b.p, b.n, &m, NULL), NV_OK, "%s", nv_last_error());
  nv_map_free(m);
  free(b.p);
}

Test(io_bad_safetensors, tensors) {
  char data[64] = {1, 2, 3};
  st_bad(st_blob(T1("F32", "[2]", "[0,8]") , data, 4), NV_ERR_IO, "past the 4 data bytes");
  st_bad(st_blob(T1("F32", "[2]", "[0,4]"), data, 4), NV_ERR_IO, "4 data bytes for a shape of 8");
  st_bad(st_blob(T1("F32", "[1]", "[4,0]"), data, 4), NV_ERR_IO, "end before they begin");
  st_bad(st_blob(T1("F32", "[1]", "[0,4]"), data, 8), NV_ERR_IO, "cover 4 of the 8");
  st_bad(st_blob(T1("F32", "[1]", "[4,8]"), data, 8), NV_ERR_IO, "gap");
  st_bad(st_blob(T1("F32", "[1]", "[0]"), data, 4), NV_ERR_IO, "[begin, end]");
  st_bad(st_blob(T1("F32", "[1.5]", "[0,4]"), data, 4), NV_ERR_IO, "fraction");
  st_bad(st_blob(T1("F32", "[-1]", "[0,4]"), data, 4), NV_ERR_IO, "non-negative");
  st_bad(st_blob(T1("F32", "[01]", "[0,4]"), data, 4), NV_ERR_IO, "leading zero");
  st_bad(st_blob(T1("F32", "[2147483648]", "[0,4]"), data, 4), NV_ERR_IO, "2^31-1");
  st_bad(st_blob(T1("F32", "[1]", "[0,18446744073709551616]"), data, 4), NV_ERR_IO, "2^64-1");
  st_bad(st_blob(T1("F32", "[2147483647,2147483647,2147483647]", "[0,4]"), data, 4), NV_ERR_IO,
         "overflows");
  st_bad(st_blob(T1("F33", "[1]", "[0,4]"), data, 4), NV_ERR_IO, "unknown dtype \"F33\"");
  st_bad(st_blob(T1("F8_E5M2", "[1]", "[0,1]"), data, 1), NV_ERR_UNSUPPORTED, "F8_E5M2");
  st_bad(st_blob("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", data, 3),
         NV_ERR_IO, "overlap");
  st_bad(st_blob("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                 "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", data, 2),
         NV_ERR_IO, "appears twice");
}

/* ---- Bad GGUF files ---- */

TestSuite(io_bad_gguf, .init = setup_dir, .fini = teardown_dir);

static blob gguf_head(uint64_t ntensors, uint64_t nkv) {
  blob b = {0};
  put_u32(&b, 0x46554747u);
  put_u32(&b, 3);
  put_u64(&b, ntensors);
  put_u64(&b, nkv);
  return b;
}

static void gguf_tensor(blob *b, const char *name, int nd, const uint64_t *ne, uint32_t type,
                        uint64_t off) {
  put_gstr(b, name);
  put_u32(b, (uint32_t)nd);
  for (int i = 0; i < nd; i++) put_u64(b, ne[i]);
  put_u32(b, type);
  put_u64(b, off);
}

static void gguf_bad(blob b, nv_gguf_mode mode, nv_status status, const char *what) {
  const char *path = path_in("bad.gguf");
  write_file(path, b.p, b.n);
  nv_map *m = NULL;
  nv_io_metadata *md = NULL;
  cr_assert_eq(nv_load_gguf(path, mode, &m, &md), status, "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), "bad.gguf"), "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), what), "expected \"%s\" in: %s", what, nv_last_error());
  cr_assert_null(m);
  cr_assert_null(md);
  free(b.p);
}

Test(io_bad_gguf, header_and_metadata) {
  blob b = gguf_head(0, 0);
  b.p[0] = 'X';
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "bad magic");
  b = gguf_head(0, 0);
  b.p[4] = 1;
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "version 1");
  b = gguf_head(0, 0);
  memcpy(b.p + 4, "\0\0\0\3", 4);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_UNSUPPORTED, "big-endian");
  gguf_bad(gguf_head(1ull << 40, 0), NV_GGUF_RAW, NV_ERR_IO, "cannot fit");
  gguf_bad(gguf_head(0, UINT64_MAX), NV_GGUF_RAW, NV_ERR_IO, "cannot fit");
  b = gguf_head(0, 1);
  put_u64(&b, UINT64_MAX);
  put_str(&b, "abcdefgh");
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "exceeds");
  b = gguf_head(0, 1);
  put_gstr(&b, "k");
  put_u32(&b, 9);
  put_u32(&b, NV_META_UINT32);
  put_u64(&b, 1ull << 61);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "exceed");
  b = gguf_head(0, 1);
  put_gstr(&b, "k");
  put_u32(&b, 9);
  put_u32(&b, NV_META_STRING);
  put_u64(&b, 1ull << 61);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "cannot fit");
  b = gguf_head(0, 1);
  put_gstr(&b, "k");
  put_u32(&b, 9);
  put_u32(&b, NV_META_ARRAY);
  put_u64(&b, 1);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_UNSUPPORTED, "nested");
  b = gguf_head(0, 1);
  put_gstr(&b, "k");
  put_u32(&b, 13);
  put_u64(&b, 0);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "unknown value type 13");
  b = gguf_head(0, 2);
  put_gstr(&b, "k");
  put_u32(&b, NV_META_UINT8);
  put(&b, "\1", 1);
  put_gstr(&b, "k");
  put_u32(&b, NV_META_UINT8);
  put(&b, "\1", 1);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "appears twice");
  b = gguf_head(0, 1);
  put_gstr(&b, "k");
  put_u32(&b, NV_META_BOOL);
  put(&b, "\2", 1);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "bool value of 2");
  b = gguf_head(0, 1);
  put_gstr(&b, "general.alignment");
  put_u32(&b, NV_META_UINT32);
  put_u32(&b, 24);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "power of two");
  b = gguf_head(0, 1);
  put_gstr(&b, "general.alignment");
  put_u32(&b, NV_META_UINT64);
  put_u64(&b, 32);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "uint32");
  b = gguf_head(0, 1);
  put_gstr(&b, "s");
  put_u32(&b, NV_META_STRING);
  put_u64(&b, 10);
  put_str(&b, "abc");
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "string of 10 bytes");
}

Test(io_bad_gguf, tensors) {
  uint64_t ne2[2] = {32, 2}, ne1[1] = {4}, big[3] = {1u << 31, 1u << 30, 1u << 30};
  blob b = gguf_head(1, 0);
  gguf_tensor(&b, "t", 1, ne1, 99, 0);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "unknown ggml type 99");
  b = gguf_head(1, 0);
  gguf_tensor(&b, "t", 1, ne1, 2 /* Q4_0 */, 0);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "not a multiple of the Q4_0 block size 32");
  b = gguf_head(1, 0);
  gguf_tensor(&b, "t", 3, big, 0, 0);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "2^31-1");
  b = gguf_head(1, 0);
  uint64_t ones[70];
  for (int i = 0; i < 70; i++) ones[i] = 1;
  gguf_tensor(&b, "t", 70, ones, 0, 0);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "dimensions");
  b = gguf_head(1, 0);
  gguf_tensor(&b, "t", 1, ne1, 0, 4);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "not a multiple of the alignment 32");
  b = gguf_head(1, 0);
  gguf_tensor(&b, "t", 1, ne1, 0, 0);
  pad_to(&b, 32);
  put(&b, "12345678", 8);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "exceed the 8-byte data section");
  b = gguf_head(1, 0);
  gguf_tensor(&b, "t", 1, ne1, 0, 0);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "truncated before the data section");
  b = gguf_head(2, 0);
  gguf_tensor(&b, "a", 1, ne1, 0, 0);
  gguf_tensor(&b, "b", 2, ne2, 0, 0);
  pad_to(&b, 32);
  for (int i = 0; i < 64; i++) put(&b, "abcd", 4);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "overlaps");
  b = gguf_head(2, 0);
  gguf_tensor(&b, "a", 1, ne1, 0, 0);
  gguf_tensor(&b, "a", 1, ne1, 0, 32);
  pad_to(&b, 32);
  for (int i = 0; i < 16; i++) put(&b, "abcd", 4);
  gguf_bad(b, NV_GGUF_RAW, NV_ERR_IO, "appears twice");
  /* A block type without a dequantizer loads raw, and fails (unsupported) dequantized. */
  uint64_t ne_k[1] = {256};
  b = gguf_head(1, 0);
  gguf_tensor(&b, "k", 1, ne_k, 12 /* Q4_K */, 0);
  pad_to(&b, 32);
  for (int i = 0; i < 144; i++) put(&b, "\x11", 1);
  blob copy = {0};
  put(&copy, b.p, b.n);
  nv_map *m;
  cr_assert_eq(nv_load_gguf_from_memory(b.p, b.n, NV_GGUF_RAW, &m, NULL), NV_OK, "%s",
               nv_last_error());
  cr_assert_eq(nv_array_dtype(nv_map_get(m, "k")), NV_DTYPE_UINT8);
  cr_assert_eq(nv_array_dim(nv_map_get(m, "k"), 0), 144);
  nv_map_free(m);
  gguf_bad(copy, NV_GGUF_DEQUANTIZE, NV_ERR_UNSUPPORTED, "Q4_K");
  free(b.p);
}

/* ---- Bad .npz files ---- */

TestSuite(io_bad_npz, .init = setup_dir, .fini = teardown_dir);

static void npz_bad(const char *path, nv_status status, const char *what) {
  nv_map *m = NULL;
  cr_assert_eq(nv_load_npz(path, &m), status, "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), what), "expected \"%s\" in: %s", what, nv_last_error());
  cr_assert_null(m);
}

/* Writes an archive with Python's zipfile (entries given as a Python expression). */
static void make_zip(const char *path, const char *body) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import zipfile, io, numpy as np\n"
           "def npy(x):\n b = io.BytesIO(); np.save(b, x); return b.getvalue()\n"
           "z = zipfile.ZipFile(\"%s\", \"w\")\n%s\nz.close()' 2>/dev/null",
           path, body);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(io_bad_npz, archives) {
  write_file(path_in("not.npz"), "hello world, not a zip file at all", 34);
  npz_bad(path_in("not.npz"), NV_ERR_IO, "not a zip archive");
  make_zip(path_in("txt.npz"), "z.writestr(\"a.npy\", b\"just text\")");
  npz_bad(path_in("txt.npz"), NV_ERR_IO, "txt.npz[a]");
  make_zip(path_in("dup.npz"),
           "import warnings; warnings.simplefilter(\"ignore\")\n"
           "z.writestr(\"a.npy\", npy(np.ones(2)))\nz.writestr(\"a\", npy(np.ones(2)))");
  npz_bad(path_in("dup.npz"), NV_ERR_IO, "appears twice");
  make_zip(path_in("bz.npz"),
           "z.writestr(\"a.npy\", npy(np.ones(2)), compress_type=zipfile.ZIP_BZIP2)");
  npz_bad(path_in("bz.npz"), NV_ERR_UNSUPPORTED, "compression method 12");
  /* A flipped data byte in a stored entry: the CRC catches it. */
  make_zip(path_in("crc.npz"), "z.writestr(\"a.npy\", npy(np.arange(100.0)))");
  size_t n;
  unsigned char *p = read_file(path_in("crc.npz"), &n);
  p[400] ^= 1;
  write_file(path_in("crc.npz"), p, n);
  free(p);
  npz_bad(path_in("crc.npz"), NV_ERR_IO, "CRC");
  /* A deflated entry claiming far more bytes than deflate can produce. */
  make_zip(path_in("bomb.npz"),
           "z.writestr(\"a.npy\", npy(np.ones(1000)), compress_type=zipfile.ZIP_DEFLATED)");
  p = read_file(path_in("bomb.npz"), &n);
  /* Patch the central directory's uncompressed size (offset 24 in its entry). */
  for (size_t i = n - 22; i-- > 0;)
    if (!memcmp(p + i, "PK\1\2", 4)) {
      memcpy(p + i + 24, "\xff\xff\xff\x7f", 4);
      break;
    }
  write_file(path_in("bomb.npz"), p, n);
  free(p);
  npz_bad(path_in("bomb.npz"), NV_ERR_IO, "cannot come from");
}
