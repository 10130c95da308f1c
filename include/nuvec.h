/* nuvec — an array framework for machine learning with MLX's semantics, in C11.
 *
 * The umbrella header: include it to get the whole public API. Each module has its own header
 * under nuvec/; see README.md and docs/ for an introduction. */
#ifndef NUVEC_H
#define NUVEC_H

#include "nuvec/base.h"
#include "nuvec/device.h"
#include "nuvec/memory.h"
#include "nuvec/array.h"
#include "nuvec/eval.h"
#include "nuvec/ops.h"
#include "nuvec/io.h"
#include "nuvec/elementwise.h"
#include "nuvec/index.h"
#include "nuvec/linalg.h"
#include "nuvec/conv.h"
#include "nuvec/transforms.h"
#include "nuvec/nn.h"
#include "nuvec/reduce.h"
#include "nuvec/random.h"
#include "nuvec/fft.h"
#include "nuvec/distributed.h"
#include "nuvec/fast.h"
#include "nuvec/quantize.h"

#endif /* NUVEC_H */
