/* The primitive table, generated from the family lists of src/core/prims.h. */
#include "core/internal.h"

#define D_NONE {-1, -1, -1, -1}
#define D_0 {0, -1, -1, -1}
#define D_01 {0, 1, -1, -1}
#define D_12 {1, 2, -1, -1}
#define D_2 {2, -1, -1, -1}
#define D_5 {5, -1, -1, -1}

const nv__prim_info nv__prims[NV__PRIM_COUNT] = {
#define NV__PRIM_ENTRY(name, str, donate, ew, view) [NV__PRIM_##name] = {str, donate, ew, view},
    NV__PRIM_LIST(NV__PRIM_ENTRY)
#undef NV__PRIM_ENTRY
};
