/* dtype sizes, names, MLX's promotion table and categories. */
#include <string.h>

#include "core/internal.h"

static const size_t sizes[NV_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8};
static const char *const names[NV_DTYPE_COUNT] = {
    "bool",  "uint8", "uint16",  "uint32",   "uint64",  "int8",    "int16",
    "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64"};

size_t nv_dtype_size(nv_dtype d) {
  return (unsigned)d < NV_DTYPE_COUNT ? sizes[d] : 0;
}

const char *nv_dtype_name(nv_dtype d) {
  return (unsigned)d < NV_DTYPE_COUNT ? names[d] : "invalid";
}

nv_status nv_dtype_from_name(const char *name, nv_dtype *out) {
  if (!name) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "dtype: NULL name");
  for (int i = 0; i < NV_DTYPE_COUNT; i++)
    if (!strcmp(name, names[i])) {
      *out = (nv_dtype)i;
      return NV_OK;
    }
  return nv__set_error(NV_ERR_INVALID_ARGUMENT, "dtype: unknown dtype '%s'", name);
}

/* MLX's promotion table (mlx/dtype.cpp), in nuvec's dtype order. */
#define B NV_DTYPE_BOOL
#define U8 NV_DTYPE_UINT8
#define U16 NV_DTYPE_UINT16
#define U32 NV_DTYPE_UINT32
#define U64 NV_DTYPE_UINT64
#define I8 NV_DTYPE_INT8
#define I16 NV_DTYPE_INT16
#define I32 NV_DTYPE_INT32
#define I64 NV_DTYPE_INT64
#define F16 NV_DTYPE_FLOAT16
#define BF NV_DTYPE_BFLOAT16
#define F32 NV_DTYPE_FLOAT32
#define F64 NV_DTYPE_FLOAT64
#define C64 NV_DTYPE_COMPLEX64
static const unsigned char promote[NV_DTYPE_COUNT][NV_DTYPE_COUNT] = {
    /*        B    U8   U16  U32  U64  I8   I16  I32  I64  F16  BF   F32  F64  C64 */
    /* B   */ {B, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF, F32, F64, C64},
    /* U8  */ {U8, U8, U16, U32, U64, I16, I16, I32, I64, F16, BF, F32, F64, C64},
    /* U16 */ {U16, U16, U16, U32, U64, I32, I32, I32, I64, F16, BF, F32, F64, C64},
    /* U32 */ {U32, U32, U32, U32, U64, I64, I64, I64, I64, F16, BF, F32, F64, C64},
    /* U64 */ {U64, U64, U64, U64, U64, F32, F32, F32, F32, F16, BF, F32, F64, C64},
    /* I8  */ {I8, I16, I32, I64, F32, I8, I16, I32, I64, F16, BF, F32, F64, C64},
    /* I16 */ {I16, I16, I32, I64, F32, I16, I16, I32, I64, F16, BF, F32, F64, C64},
    /* I32 */ {I32, I32, I32, I64, F32, I32, I32, I32, I64, F16, BF, F32, F64, C64},
    /* I64 */ {I64, I64, I64, I64, F32, I64, I64, I64, I64, F16, BF, F32, F64, C64},
    /* F16 */ {F16, F16, F16, F16, F16, F16, F16, F16, F16, F16, F32, F32, F64, C64},
    /* BF  */ {BF, BF, BF, BF, BF, BF, BF, BF, BF, F32, BF, F32, F64, C64},
    /* F32 */ {F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F64, C64},
    /* F64 */ {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, C64},
    /* C64 */ {C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64},
};

nv_dtype nv_promote_types(nv_dtype a, nv_dtype b) {
  if ((unsigned)a >= NV_DTYPE_COUNT || (unsigned)b >= NV_DTYPE_COUNT) return NV_DTYPE_COUNT;
  return (nv_dtype)promote[a][b];
}

bool nv_issubdtype(nv_dtype d, nv_dtype_category c) {
  if ((unsigned)d >= NV_DTYPE_COUNT) return false;
  bool is_uint = d >= U8 && d <= U64, is_sint = d >= I8 && d <= I64;
  bool is_float = d == F16 || d == BF || d == F32 || d == F64;
  switch (c) {
    case NV_CATEGORY_GENERIC: return true;
    case NV_CATEGORY_NUMBER: return d != B;
    case NV_CATEGORY_INTEGER: return is_uint || is_sint;
    case NV_CATEGORY_SIGNED_INTEGER: return is_sint;
    case NV_CATEGORY_UNSIGNED_INTEGER: return is_uint;
    case NV_CATEGORY_INEXACT: return is_float || d == C64;
    case NV_CATEGORY_FLOATING: return is_float;
    case NV_CATEGORY_COMPLEX: return d == C64;
  }
  return false;
}
