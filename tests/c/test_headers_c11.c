/* The public headers compile as strict ISO C11 (-pedantic-errors). */
#include "nuvec.h"

int main(void) { return nv_dtype_size(NV_DTYPE_FLOAT32) == 4 ? 0 : 1; }
