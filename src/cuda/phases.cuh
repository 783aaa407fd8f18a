/*
 * Device phases of the GPU solve, shared by the persistent megakernel and
 * the comparison variants: each is a __device__ function that one block
 * runs over its share of the work, between grid-wide barriers that the
 * caller places: the evaluation (cuda/evaluate.cuh), the reductions
 * (cuda/reduce.cuh) and the vector phases (cuda/vectors.cuh), over the
 * args of cuda/args.cuh. Scalars come from opt/solver.h, the Bloch step from
 * model/bloch_math.h: the math is the CPU backend's.
 *
 * Work layout of an evaluation. Spins are grouped in tiles of SB spins; a
 * block of TB = P * SB threads takes one tile at a time (grid-stride over
 * tiles), thread t owning spin js = t % SB of the tile and time segment
 * p = t / SB of P equal segments:
 *   composite  each thread composes its segment's steps into one affine
 *              map T_p (3x4: rotation and relaxation), in shared memory;
 *   scan       the P threads of a spin scan its maps over the segments
 *              (Hillis-Steele, log2 P levels): the prefix compositions give
 *              each segment's end state, the last one M_Nt (the loss and
 *              dL/dM_Nt), and the suffix products of the maps' linear parts
 *              carry the adjoint back (segment-end adjoints);
 *   replay     each thread walks its segment backward from the segment's
 *              end state (reverse step + adjoint, model/bloch_math.h), and the SB
 *              threads of a segment sum their dF/du_k, dF/dv_k with warp
 *              shuffles in a fixed order into the block's partial gradient
 *              (its tiles added in tile order).
 * The partial gradients of all blocks are then summed per time step in a
 * fixed order (reduce_gradient): no atomics, so results are bit-identical
 * for a given launch shape. With designed gradient axes (the DG kernels,
 * cuda/gradient.cuh) the team first forms the waveforms, each block a
 * share of the steps, into the team's gdt copy (one team barrier before
 * the evaluation; short pulses and the channels kernels: every block its
 * own copy, no barrier), replay sums dF/dg beside dF/du, dF/dv, and
 * each block leaves its rows as reverse cumulative sums for the same
 * reduction.
 */
#ifndef PS_SRC_GPU_PHASES_CUH
#define PS_SRC_GPU_PHASES_CUH

#include "cuda/args.cuh"
#include "cuda/evaluate.cuh"
#include "cuda/reduce.cuh"
#include "cuda/vectors.cuh"

#endif /* PS_SRC_GPU_PHASES_CUH */
