/*
 * Precision template for cpu/objective.c: one spin's forward simulation and
 * checkpointed backward sweep. Included once per PS_REAL with PS_SFX.
 *
 * Backward sweep: with K = Nt the forward pass keeps every state M_{k-1}
 * and the backward pass walks them in reverse through the adjoint step;
 * with K < Nt (a trajectory too long to keep, cpu/objective.c) the forward
 * pass keeps M at the start of every segment of K steps (K ~ sqrt(Nt)) and
 * the backward pass replays each segment from its checkpoint into a
 * K-state buffer first: memory O(Nt/K + K) instead of O(Nt), for a third
 * pass over the steps. Both give the same states bit for bit (the replay
 * repeats the forward pass's operations), and, unlike reversing the
 * rotations, stay exact with relaxation (undoing relaxation would divide by
 * E1, E2 and amplify rounding).
 */

typedef struct PS_SFX(spin_ws) {
    PS_REAL *u, *v;   /* [nc][nt] pulse per channel, G */
    PS_REAL *gdt;     /* [nt][3] dt gamma G_k, rad/cm */
    PS_REAL *ckpt;    /* [nseg][3] segment-start states (K < Nt) */
    PS_REAL *seg;     /* [K][3] the states M_{k-1}: kept (K = Nt) or replayed */
    double *gacc_g;   /* [nt][3] the lane's sum of r_a dL/dtheta_z per step (dL/dG_k up to
                         dt gamma), or NULL */
} PS_SFX(spin_ws);

/* Per-spin constants (model/design.h, ps_design_spin) in this precision. */
typedef struct PS_SFX(spin_par) {
    PS_REAL r[3], wz, a1, a2; /* relaxation decrements 1 - exp(-dt/T) */
    PS_REAL gS[PS_MAX_CHANNELS][2]; /* dt gamma S_jc */
    int relax, nc;
} PS_SFX(spin_par);

/* theta of step k for the spin (model/design.h), nt the pulse's stride. */
PS_HD void PS_SFX(spin_theta)(const PS_SFX(spin_ws) *ws,
                              const PS_SFX(spin_par) *sp, size_t nt, size_t k,
                              PS_REAL th[3])
{
    PS_SFX(ps_design_theta_channels)(sp->nc, (const PS_REAL (*)[2])sp->gS, ws->u + k, ws->v + k, nt,
                                     ws->gdt + 3 * k, sp->r, sp->wz, th);
}

/* M_Nt from m0 (in/out m[3]); if keep, keeps the states for the backward
 * sweep: every one (K = Nt) or every K-th. */
static void PS_SFX(spin_forward)(const PS_SFX(spin_ws) *ws,
                                 const PS_SFX(spin_par) *sp, size_t nt,
                                 size_t K, PS_REAL m[3], int keep)
{
    PS_REAL th[3];
    for (size_t k = 0; k < nt; k++) {
        if (keep && (K >= nt || k % K == 0)) {
            PS_REAL *c = K >= nt ? ws->seg + 3 * k : ws->ckpt + 3 * (k / K);
            c[0] = m[0];
            c[1] = m[1];
            c[2] = m[2];
        }
        PS_SFX(spin_theta)(ws, sp, nt, k, th);
        PS_SFX(ps_bloch_step)(th, m, sp->relax, sp->a1, sp->a2);
    }
}

/*
 * The adjoint step k (state mprev = M_{k-1}, lam = dL/dM_k in, dL/dM_{k-1}
 * out); adds the spin's dL/du_k, dL/dv_k (model/design.h, chain rule) to
 * gacc in the layout of x (double accumulation).
 */
static inline void PS_SFX(spin_adjoint)(const PS_SFX(spin_ws) *ws,
                                        const PS_SFX(spin_par) *sp, size_t nt,
                                        size_t k, const PS_REAL mprev[3],
                                        PS_REAL lam[3], double *gacc)
{
    PS_REAL th[3], gth[3];
    PS_SFX(spin_theta)(ws, sp, nt, k, th);
    PS_SFX(ps_bloch_adjoint)(th, mprev, lam, sp->relax, sp->a1, sp->a2, gth);
    if (ws->gacc_g) /* theta_z = gdt_k . r + wz: dL/dG_ka = dt gamma r_a gth_z */
        for (int a = 0; a < 3; a++)
            ws->gacc_g[3 * k + a] += (double)sp->r[a] * (double)gth[2];
    /* the chain rule in the accumulation's precision, double */
    const double gthd[3] = {gth[0], gth[1], gth[2]};
    for (int c = 0; c < sp->nc; c++) {
        double gu, gv;
        ps_design_spin_grad_channel_d((double)sp->gS[c][0], (double)sp->gS[c][1], gthd,
                                      &gu, &gv);
        gacc[PS_X_U(nt, c, k)] += gu;
        gacc[PS_X_V(nt, c, k)] += gv;
    }
}

/*
 * Backward sweep with lam = dL/dM_Nt over the states spin_forward kept
 * (K = Nt), or over each segment replayed from its checkpoint (K < Nt).
 */
static void PS_SFX(spin_backward)(const PS_SFX(spin_ws) *ws,
                                  const PS_SFX(spin_par) *sp, size_t nt,
                                  size_t K, PS_REAL lam[3], double *gacc)
{
    if (K >= nt) {
        for (size_t k = nt; k-- > 0;)
            PS_SFX(spin_adjoint)(ws, sp, nt, k, ws->seg + 3 * k, lam, gacc);
        return;
    }
    PS_REAL th[3];
    size_t nseg = (nt + K - 1) / K;
    for (size_t s = nseg; s-- > 0;) {
        size_t k0 = s * K, k1 = k0 + K < nt ? k0 + K : nt;
        PS_REAL m[3] = {ws->ckpt[3 * s], ws->ckpt[3 * s + 1],
                        ws->ckpt[3 * s + 2]};
        for (size_t k = k0; k < k1; k++) {
            PS_REAL *b = ws->seg + 3 * (k - k0);
            b[0] = m[0];
            b[1] = m[1];
            b[2] = m[2];
            PS_SFX(spin_theta)(ws, sp, nt, k, th);
            PS_SFX(ps_bloch_step)(th, m, sp->relax, sp->a1, sp->a2);
        }
        for (size_t k = k1; k-- > k0;)
            PS_SFX(spin_adjoint)(ws, sp, nt, k, ws->seg + 3 * (k - k0), lam, gacc);
    }
}

/*
 * Loss of spins [j0, j1) and, if gacc, their gradient added to gacc[nx].
 * mout[ns][3] (may be NULL) receives M_Nt.
 */
PS_FLUSH_NOINLINE /* called between ps_flush_begin and _end (cpu/fpmode.h) */
static double PS_SFX(lane_eval)(const ps_problem *p, const PS_SFX(spin_ws) *ws,
                                size_t K, size_t j0, size_t j1, double *gacc,
                                double *mout)
{
    double loss = 0.0;
    for (size_t j = j0; j < j1; j++) {
        ps_spin_consts c;
        ps_design_spin(p, j, &c);
        PS_SFX(spin_par) sp;
        for (int i = 0; i < 3; i++)
            sp.r[i] = (PS_REAL)c.r[i];
        sp.nc = (int)p->nc;
        for (int i = 0; i < sp.nc; i++) {
            sp.gS[i][0] = (PS_REAL)c.gS[i][0];
            sp.gS[i][1] = (PS_REAL)c.gS[i][1];
        }
        sp.wz = (PS_REAL)c.wz;
        sp.relax = p->t1 || p->t2;
        sp.a1 = (PS_REAL)c.a1;
        sp.a2 = (PS_REAL)c.a2;
        PS_REAL m[3] = {(PS_REAL)c.m0[0], (PS_REAL)c.m0[1], (PS_REAL)c.m0[2]};
        PS_SFX(spin_forward)(ws, &sp, p->nt, K, m, gacc != NULL);
        double md[3] = {m[0], m[1], m[2]}, lamd[3];
        double w = c.w;
        loss += ps_spin_loss((int)p->loss, w, md, p->target + 3 * j, lamd);
        if (mout) {
            mout[3 * j] = md[0];
            mout[3 * j + 1] = md[1];
            mout[3 * j + 2] = md[2];
        }
        if (gacc && w != 0.0) {
            PS_REAL lam[3] = {(PS_REAL)lamd[0], (PS_REAL)lamd[1],
                              (PS_REAL)lamd[2]};
            PS_SFX(spin_backward)(ws, &sp, p->nt, K, lam, gacc);
        }
    }
    return loss;
}
