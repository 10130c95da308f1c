/* The primitive table: name, donation candidates and flags of every primitive. */
#include "core/internal.h"

#define NONE {-1, -1, -1, -1}
#define UNARY {0, -1, -1, -1}
#define BINARY {0, 1, -1, -1}

const nv__prim_info nv__prims[NV__PRIM_COUNT] = {
    [NV__PRIM_CONSTANT] = {"constant", NONE, false, false},
    [NV__PRIM_FULL] = {"full", NONE, false, false},
    [NV__PRIM_ARANGE] = {"arange", NONE, false, false},
    [NV__PRIM_EYE] = {"eye", NONE, false, false},
    [NV__PRIM_ASTYPE] = {"astype", UNARY, true, false},
    [NV__PRIM_COPY] = {"copy", NONE, false, false},
    [NV__PRIM_TO_FP8] = {"to_fp8", NONE, false, false},
    [NV__PRIM_FROM_FP8] = {"from_fp8", NONE, false, false},
    [NV__PRIM_RESHAPE] = {"reshape", NONE, false, true},
    [NV__PRIM_TRANSPOSE] = {"transpose", NONE, false, true},
    [NV__PRIM_BROADCAST] = {"broadcast_to", NONE, false, true},
    [NV__PRIM_SLICE] = {"slice", NONE, false, true},
    [NV__PRIM_SQUEEZE] = {"squeeze", NONE, false, true},
    [NV__PRIM_EXPAND_DIMS] = {"expand_dims", NONE, false, true},
    [NV__PRIM_AS_STRIDED] = {"as_strided", NONE, false, true},
    [NV__PRIM_SLICE_UPDATE] = {"slice_update", UNARY, false, false},
    [NV__PRIM_NEGATIVE] = {"negative", UNARY, true, false},
    [NV__PRIM_ABS] = {"abs", UNARY, true, false},
    [NV__PRIM_EXP] = {"exp", UNARY, true, false},
    [NV__PRIM_LOG] = {"log", UNARY, true, false},
    [NV__PRIM_SQRT] = {"sqrt", UNARY, true, false},
    [NV__PRIM_ADD] = {"add", BINARY, true, false},
    [NV__PRIM_SUBTRACT] = {"subtract", BINARY, true, false},
    [NV__PRIM_MULTIPLY] = {"multiply", BINARY, true, false},
    [NV__PRIM_DIVIDE] = {"divide", BINARY, true, false},
    [NV__PRIM_MAXIMUM] = {"maximum", BINARY, true, false},
    [NV__PRIM_MINIMUM] = {"minimum", BINARY, true, false},
    [NV__PRIM_SUM] = {"sum", NONE, false, false},
    [NV__PRIM_TEST_ADD_MULTIPLY] = {"test_add_multiply", NONE, false, false},
};
