/*
 * The spin loops of cpu/objective_tmpl.h in both precisions for one
 * instruction set: the includer defines PS_ISA(name), the names of this
 * set's functions (name itself for the build's baseline). No include guard
 * on purpose: cpu/objective.c includes it once per instruction set.
 */
#define PS_REAL float
#define PS_SFX(name) name##_f
#define PS_CFN(name) PS_ISA(name##_f)
#define PS_FMA PS_FMA_F
#define PS_MID_Q PS_MID_Q_F
#include "cpu/objective_tmpl.h"
#undef PS_REAL
#undef PS_SFX
#undef PS_CFN
#undef PS_FMA
#undef PS_MID_Q

#define PS_REAL double
#define PS_SFX(name) name##_d
#define PS_CFN(name) PS_ISA(name##_d)
#define PS_FMA PS_FMA_D
#include "cpu/objective_tmpl.h"
#undef PS_REAL
#undef PS_SFX
#undef PS_CFN
#undef PS_FMA
