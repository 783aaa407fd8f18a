/*
 * The L-BFGS direction by one warp (lane l owning pair l), bit for bit the
 * direction of opt/lbfgs.h: the GPU megakernel's form, emulated with host
 * threads in the unit tests.
 */
#ifndef PS_SRC_OPT_LBFGS_WARP_H
#define PS_SRC_OPT_LBFGS_WARP_H

#include "opt/lbfgs.h"

/*
 * The warp form's primitives: CUDA's; or, with PS_WARP_EMULATION (tests
 * only: tests/unit/warp_emu.c), the includer's PS_LANE, PS_SHFL and
 * PS_SYNCWARP, host threads as the lanes.
 */
#if defined(__CUDACC__)
#define PS_HAVE_WARP 1
#define PS_WARP_FN __device__ __forceinline__
#define PS_LANE() ((int)(threadIdx.x & 31u))
#define PS_SHFL(v, src) __shfl_sync(0xffffffffu, (v), (src)) /* lane src's v, to all 32 */
#define PS_SYNCWARP() __syncwarp()
#elif defined(PS_WARP_EMULATION)
#define PS_HAVE_WARP 1
#define PS_WARP_FN static inline
#endif

#ifdef PS_HAVE_WARP
/*
 * ps_lbfgs_direction by one warp, bit for bit: all 32 lanes call it,
 * converged (k <= m <= 32 = PS_MAX_MEMORY); lane l owns pair l: its slot,
 * 1/R_ll, acc_l, t_l and p_l live in its registers, and t_l, p_l reach the
 * other lanes by shuffles, k dependent steps per substitution. Reads of lb
 * (the block's state in shared memory): the back substitution's column
 * R_il, i < l, lies in one bank (an l-way conflict, off the dependent
 * chain: the load does not wait for t_l); everything else is read along
 * rows, one element per lane. Ends with the warp converged.
 */
PS_WARP_FN void ps_lbfgs_direction_warp(ps_lbfgs *lb)
{
    const int lane = PS_LANE();
    const int k = lb->k, m = lb->m;
    if (k == 0) {
        if (lane == 0)
            ps_lbfgs_steepest(lb);
        PS_SYNCWARP();
        return;
    }
    const int own = lane < k;
    const int first = ps_lbfgs_first(lb);
    const double gamma = ps_lbfgs_gamma(lb);
    const int slot = lane < m ? ps_lbfgs_slot(first, lane, m) : 0;
    double rd = 0.0, acc = 0.0, t = 0.0, p = 0.0;
    if (own) {
        rd = ps_lbfgs_rdiag(lb, slot);
        acc = lb->sg[slot];
    }

    /* t = R^-1 a: lane l solves, lanes i < l eliminate column l (its
     * entries loaded a step ahead, off the chain of dependent steps) */
    int sl = lb->newest; /* slot of pair l */
    double r = lane < k - 1 ? lb->sy[slot][sl] : 0.0;
    for (int l = k - 1; l >= 0; l--) {
        const int sn = sl == 0 ? m - 1 : sl - 1;
        const double rn = lane < l - 1 ? lb->sy[slot][sn] : 0.0;
        const double tl = PS_SHFL(ps_lbfgs_solve(acc, rd), l);
        if (lane == l)
            t = tl;
        if (lane < l)
            acc = ps_lbfgs_elim(acc, r, tl);
        r = rn;
        sl = sn;
    }
    /* w_l by lane l, j ascending */
    double yyt = 0.0;
    sl = first;
    for (int j = 0; j < k; j++) {
        const double tj = PS_SHFL(t, j);
        if (own)
            yyt = ps_lbfgs_madd(yyt, lb->yy[sl][slot], tj);
        sl = sl + 1 == m ? 0 : sl + 1;
    }
    if (own)
        acc = ps_lbfgs_w(lb->sy[slot][slot], t, gamma, yyt, lb->yg[slot]);
    /* p = R^-T w: lane l solves, lanes l < i < k eliminate row l (loaded
     * a step ahead) */
    sl = first;
    r = own && lane > 0 ? lb->sy[sl][slot] : 0.0;
    for (int l = 0; l < k; l++) {
        const int sn = sl + 1 == m ? 0 : sl + 1;
        const double rn = own && lane > l + 1 ? lb->sy[sn][slot] : 0.0;
        const double pl = PS_SHFL(ps_lbfgs_solve(acc, rd), l);
        if (lane == l)
            p = pl;
        if (lane > l && own)
            acc = ps_lbfgs_elim(acc, r, pl);
        r = rn;
        sl = sn;
    }
    /* coefficients; g.d summed in l order (every lane the same sum) */
    double e = 0.0;
    if (own) {
        ps_lbfgs_store(lb, slot, gamma, t, p);
        e = ps_lbfgs_gd_term(p, lb->sg[slot], gamma, t, lb->yg[slot]);
    } else if (lane < m) {
        lb->cs[slot] = 0.0;
        lb->cy[slot] = 0.0;
    }
    double gd = ps_lbfgs_gd0(gamma, lb->gg);
    for (int j = 0; j < k; j++)
        gd += PS_SHFL(e, j);
    PS_SYNCWARP(); /* the lanes' cs, cy and reads of k before lane 0's fallback */
    if (lane == 0)
        ps_lbfgs_conclude(lb, gamma, gd);
    PS_SYNCWARP();
}
#endif /* PS_HAVE_WARP */

#endif /* PS_SRC_OPT_LBFGS_WARP_H */
