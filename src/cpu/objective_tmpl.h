/*
 * Template for cpu/objective.c: the forward simulation and the backward
 * sweep of a group of PS_CPU_GROUP spins. Included once per precision
 * (PS_REAL, PS_SFX the suffix of the shared math's functions, PS_FMA) and
 * instruction set (PS_CFN(name): the names of its own functions and types).
 *
 * Groups: the spins of a group take every step together, one spin a slot
 * of loops over the PS_GW slots, which the compiler unrolls and vectorizes
 * (GCC -O3: 4 floats an SSE2 operation, 8 an AVX2 one, 16 an AVX-512 one),
 * in the shared model math (model/bloch_math.h, model/design.h) written for
 * one spin. A slot
 * computes what the one-spin functions compute, operation for operation
 * (no contraction, no reassociation), so every spin's bits are those of a
 * spin simulated alone. The rotation's coefficients take their series for
 * every slot (no branch in the loop); in float32, when the slots past it
 * (phi^2 >= 0.25) are all below PS_MID_Q (phi^2 < 4), every slot takes
 * the polynomials there too and those slots keep them; otherwise the
 * slots past the series take ps_rot_coeffs one by one (sine, cosine and
 * divisions from libm, which has no vector form of the same bits). The gradient's double
 * accumulation stays one spin at a time in spin order: each sum over spins
 * adds the same terms in the same order as a loop over spins would.
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

#define PS_GW PS_CPU_GROUP

typedef struct PS_CFN(spin_ws) {
    const PS_REAL *u, *v; /* [nc][nt] pulse per channel, G */
    const PS_REAL *gdt;   /* [nt][3] dt gamma G_k, rad/cm */
    PS_REAL *ckpt;        /* [nseg][3][PS_GW] segment-start states (K < Nt) */
    PS_REAL *seg;         /* [K][3][PS_GW] the states M_{k-1}: kept (K = Nt) or replayed */
} PS_CFN(spin_ws);

/* A group's per-spin constants (model/design.h, ps_design_spin) in this
 * precision, a slot each; slots n.. repeat spin n - 1 and add nothing. */
typedef struct PS_CFN(group) {
    PS_REAL r[3][PS_GW], wz[PS_GW], a1[PS_GW], a2[PS_GW]; /* relaxation decrements */
    PS_REAL gS[PS_MAX_CHANNELS][2][PS_GW]; /* dt gamma S_jc */
    double *ga[PS_GW]; /* the spin's lane's dL/dx accumulator; NULL: none (w = 0, padding) */
    double *gg[PS_GW]; /* its sum of r_a dL/dtheta_z per step [nt][3], or NULL */
    int relax, nc, n, dg; /* dg: the dL/dG sums are asked for (gg) */
} PS_CFN(group);

/* theta of step k for the group's spins (model/design.h), nt the pulse's
 * stride: the first channel, then each other one added. */
static inline void PS_CFN(group_theta)(const PS_CFN(spin_ws) *ws, const PS_CFN(group) *g,
                                       size_t nt, size_t k, PS_REAL th[3][PS_GW])
{
    const PS_REAL *u = ws->u + k, *v = ws->v + k, *gd = ws->gdt + 3 * k;
    const PS_REAL u0 = u[0], v0 = v[0];
    for (int l = 0; l < PS_GW; l++) {
        const PS_REAL r[3] = {g->r[0][l], g->r[1][l], g->r[2][l]};
        PS_REAL t[3];
        PS_SFX(ps_design_theta_first)(g->gS[0][0][l], g->gS[0][1][l], u0, v0, gd, r, g->wz[l],
                                      t);
        th[0][l] = t[0];
        th[1][l] = t[1];
        th[2][l] = t[2];
    }
    for (int c = 1; c < g->nc; c++) {
        const PS_REAL uc = u[c * nt], vc = v[c * nt];
        for (int l = 0; l < PS_GW; l++) {
            PS_REAL t[3] = {th[0][l], th[1][l], th[2][l]};
            PS_SFX(ps_design_theta_add)(g->gS[c][0][l], g->gS[c][1][l], uc, vc, t);
            th[0][l] = t[0];
            th[1][l] = t[1];
        }
    }
}

/* q = theta . theta of every slot; returns whether a slot is past the
 * series (!(q < PS_SERIES_Q), NaN included, as ps_rot_coeffs decides). */
static inline int PS_CFN(group_q)(const PS_REAL th[3][PS_GW], PS_REAL q[PS_GW])
{
    int past = 0;
    for (int l = 0; l < PS_GW; l++) {
        q[l] = PS_DOT3(th[0][l], th[0][l], th[1][l], th[1][l], th[2][l], th[2][l]);
        past |= !(q[l] < (PS_REAL)PS_SERIES_Q);
    }
    return past;
}

/* Whether every slot is below PS_MID_Q (float32: the slots past the
 * series then all take the polynomials, vectorized; 0 in float64, which
 * has none, and for NaN, which ps_rot_coeffs passes on). */
static inline int PS_CFN(group_mid)(const PS_REAL q[PS_GW])
{
#ifdef PS_MID_Q
    int below = 1;
    for (int l = 0; l < PS_GW; l++)
        below &= q[l] < (PS_REAL)PS_MID_Q;
    return below;
#else
    (void)q;
    return 0;
#endif
}

/* The step with its coefficients (ps_bloch_step_coeffs per slot); relax a
 * constant where it is called, so that the loop has no branch. */
static inline void PS_CFN(group_step_apply)(const PS_CFN(group) *g, const PS_REAL th[3][PS_GW],
                                            const PS_REAL c[PS_GW], const PS_REAL A[PS_GW],
                                            const PS_REAL B[PS_GW], PS_REAL m[3][PS_GW],
                                            const int relax)
{
    for (int l = 0; l < PS_GW; l++) {
        const PS_REAL t[3] = {th[0][l], th[1][l], th[2][l]};
        PS_REAL mm[3] = {m[0][l], m[1][l], m[2][l]};
        PS_SFX(ps_bloch_step_coeffs)(t, c[l], A[l], B[l], mm, relax, g->a1[l], g->a2[l]);
        m[0][l] = mm[0];
        m[1][l] = mm[1];
        m[2][l] = mm[2];
    }
}

/* M <- step(theta) M for the group (ps_bloch_step per slot). */
static inline void PS_CFN(group_step)(const PS_CFN(group) *g, const PS_REAL th[3][PS_GW],
                                      PS_REAL m[3][PS_GW])
{
    PS_REAL q[PS_GW], c[PS_GW], A[PS_GW], B[PS_GW];
    const int past = PS_CFN(group_q)(th, q);
    for (int l = 0; l < PS_GW; l++)
        PS_SFX(ps_rot_coeffs_series)(q[l], &c[l], &A[l], &B[l]);
    if (past && PS_CFN(group_mid)(q)) {
#ifdef PS_MID_Q
        PS_REAL cm[PS_GW], Am[PS_GW], Bm[PS_GW];
        for (int l = 0; l < PS_GW; l++)
            PS_SFX(ps_rot_coeffs_mid)(q[l], &cm[l], &Am[l], &Bm[l]);
        for (int l = 0; l < PS_GW; l++) {
            const int mid = !(q[l] < (PS_REAL)PS_SERIES_Q);
            c[l] = mid ? cm[l] : c[l];
            A[l] = mid ? Am[l] : A[l];
            B[l] = mid ? Bm[l] : B[l];
        }
#endif
    } else if (past) {
        for (int l = 0; l < PS_GW; l++)
            if (!(q[l] < (PS_REAL)PS_SERIES_Q))
                PS_SFX(ps_rot_coeffs)(q[l], &c[l], &A[l], &B[l]);
    }
    if (g->relax)
        PS_CFN(group_step_apply)(g, th, c, A, B, m, 1);
    else
        PS_CFN(group_step_apply)(g, th, c, A, B, m, 0);
}

/* The adjoint with its coefficients (ps_bloch_adjoint_coeffs per slot);
 * relax a constant where it is called. */
static inline void PS_CFN(group_adjoint_apply)(const PS_CFN(group) *g,
                                               const PS_REAL th[3][PS_GW],
                                               const PS_REAL c[PS_GW], const PS_REAL A[PS_GW],
                                               const PS_REAL B[PS_GW], const PS_REAL C[PS_GW],
                                               const PS_REAL mprev[3][PS_GW],
                                               PS_REAL lam[3][PS_GW], PS_REAL gth[3][PS_GW],
                                               const int relax)
{
    for (int l = 0; l < PS_GW; l++) {
        const PS_REAL t[3] = {th[0][l], th[1][l], th[2][l]};
        const PS_REAL mm[3] = {mprev[0][l], mprev[1][l], mprev[2][l]};
        PS_REAL la[3] = {lam[0][l], lam[1][l], lam[2][l]}, gt[3];
        PS_SFX(ps_bloch_adjoint_coeffs)(t, c[l], A[l], B[l], C[l], mm, la, relax, g->a1[l],
                                        g->a2[l], gt);
        for (int i = 0; i < 3; i++) {
            lam[i][l] = la[i];
            gth[i][l] = gt[i];
        }
    }
}

/* The adjoint step of the group (ps_bloch_adjoint per slot): mprev the
 * states M_{k-1}, lam dL/dM_k in and dL/dM_{k-1} out, gth dL/dtheta. */
static inline void PS_CFN(group_adjoint)(const PS_CFN(group) *g, const PS_REAL th[3][PS_GW],
                                         const PS_REAL mprev[3][PS_GW], PS_REAL lam[3][PS_GW],
                                         PS_REAL gth[3][PS_GW])
{
    PS_REAL q[PS_GW], c[PS_GW], A[PS_GW], B[PS_GW], C[PS_GW];
    const int past = PS_CFN(group_q)(th, q);
    for (int l = 0; l < PS_GW; l++)
        PS_SFX(ps_rot_coeffs_jac_series)(q[l], &c[l], &A[l], &B[l], &C[l]);
    if (past && PS_CFN(group_mid)(q)) {
#ifdef PS_MID_Q
        PS_REAL cm[PS_GW], Am[PS_GW], Bm[PS_GW], Cm[PS_GW];
        for (int l = 0; l < PS_GW; l++)
            PS_SFX(ps_rot_coeffs_jac_mid)(q[l], &cm[l], &Am[l], &Bm[l], &Cm[l]);
        for (int l = 0; l < PS_GW; l++) {
            const int mid = !(q[l] < (PS_REAL)PS_SERIES_Q);
            c[l] = mid ? cm[l] : c[l];
            A[l] = mid ? Am[l] : A[l];
            B[l] = mid ? Bm[l] : B[l];
            C[l] = mid ? Cm[l] : C[l];
        }
#endif
    } else if (past) {
        for (int l = 0; l < PS_GW; l++)
            if (!(q[l] < (PS_REAL)PS_SERIES_Q))
                PS_SFX(ps_rot_coeffs_jac)(q[l], &c[l], &A[l], &B[l], &C[l]);
    }
    if (g->relax)
        PS_CFN(group_adjoint_apply)(g, th, c, A, B, C, mprev, lam, gth, 1);
    else
        PS_CFN(group_adjoint_apply)(g, th, c, A, B, C, mprev, lam, gth, 0);
}

/*
 * acc[l][iu] += tu[l] (and acc[l][iv] += tv[l] if tv) for slots l < n in
 * order, skipping slots whose acc is NULL; a run of slots with the same acc
 * sums in a register.
 */
static inline void PS_CFN(group_sums)(double *const acc[PS_GW], int n, size_t iu,
                                      const double tu[PS_GW], const double *tv, size_t iv)
{
    double *cur = NULL, su = 0.0, sv = 0.0;
    for (int l = 0; l < n; l++) {
        if (!acc[l])
            continue;
        if (acc[l] != cur) {
            if (cur) {
                cur[iu] = su;
                if (tv)
                    cur[iv] = sv;
            }
            cur = acc[l];
            su = cur[iu];
            sv = tv ? cur[iv] : 0.0;
        }
        su += tu[l];
        if (tv)
            sv += tv[l];
    }
    if (cur) {
        cur[iu] = su;
        if (tv)
            cur[iv] = sv;
    }
}

/*
 * Adds step k's dL/du_k, dL/dv_k of each spin (model/design.h, chain rule,
 * in double) to its lane's accumulator in the layout of x, and r_a gth_z
 * (dL/dG_k up to dt gamma) to its dL/dG sum, spin after spin: every sum
 * takes the same terms in the same order as a loop over the spins. The
 * terms are computed for the whole group first; each sum then runs in a
 * register over a run of slots with the same lane (the whole group, unless
 * it spans lanes).
 */
static inline void PS_CFN(group_accumulate)(const PS_CFN(group) *g, size_t nt, size_t k,
                                            const PS_REAL gth[3][PS_GW])
{
    double gd[3][PS_GW], tu[PS_GW], tv[PS_GW];
    for (int l = 0; l < PS_GW; l++)
        for (int i = 0; i < 3; i++)
            gd[i][l] = (double)gth[i][l];
    /* theta_z = gdt_k . r + wz: dL/dG_ka = dt gamma r_a gth_z */
    for (int a = 0; g->dg && a < 3; a++) {
        for (int l = 0; l < PS_GW; l++)
            tu[l] = (double)g->r[a][l] * gd[2][l];
        PS_CFN(group_sums)(g->gg, g->n, 3 * k + a, tu, NULL, 0);
    }
    for (int c = 0; c < g->nc; c++) {
        for (int l = 0; l < PS_GW; l++) {
            const double t[3] = {gd[0][l], gd[1][l], gd[2][l]};
            ps_design_spin_grad_channel_d((double)g->gS[c][0][l], (double)g->gS[c][1][l], t,
                                          &tu[l], &tv[l]);
        }
        PS_CFN(group_sums)(g->ga, g->n, PS_X_U(nt, c, k), tu, tv, PS_X_V(nt, c, k));
    }
}

static inline void PS_CFN(group_copy)(PS_REAL dst[3][PS_GW], const PS_REAL src[3][PS_GW])
{
    memcpy(dst, src, 3 * PS_GW * sizeof(PS_REAL));
}

/* M_Nt from m0 (in/out m); if keep, keeps the states for the backward
 * sweep: every one (K = Nt) or every K-th. */
static void PS_CFN(group_forward)(const PS_CFN(spin_ws) *ws, const PS_CFN(group) *g,
                                  size_t nt, size_t K, PS_REAL m[3][PS_GW], int keep)
{
    PS_REAL th[3][PS_GW];
    PS_REAL(*kept)[3][PS_GW] = (PS_REAL(*)[3][PS_GW])(K >= nt ? ws->seg : ws->ckpt);
    for (size_t k = 0; k < nt; k++) {
        if (keep && (K >= nt || k % K == 0))
            PS_CFN(group_copy)(kept[K >= nt ? k : k / K], (const PS_REAL(*)[PS_GW])m);
        PS_CFN(group_theta)(ws, g, nt, k, th);
        PS_CFN(group_step)(g, (const PS_REAL(*)[PS_GW])th, m);
    }
}

/* Steps [k0, k1) backward from lam = dL/dM_k1 over the states seg[k - k0]. */
static void PS_CFN(group_sweep)(const PS_CFN(spin_ws) *ws, const PS_CFN(group) *g, size_t nt,
                                size_t k0, size_t k1, PS_REAL lam[3][PS_GW])
{
    PS_REAL th[3][PS_GW], gth[3][PS_GW];
    const PS_REAL(*seg)[3][PS_GW] = (const PS_REAL(*)[3][PS_GW])ws->seg;
    for (size_t k = k1; k-- > k0;) {
        PS_CFN(group_theta)(ws, g, nt, k, th);
        PS_CFN(group_adjoint)(g, (const PS_REAL(*)[PS_GW])th, seg[k - k0], lam, gth);
        PS_CFN(group_accumulate)(g, nt, k, (const PS_REAL(*)[PS_GW])gth);
    }
}

/*
 * Backward sweep with lam = dL/dM_Nt over the states group_forward kept
 * (K = Nt), or over each segment replayed from its checkpoint (K < Nt).
 */
static void PS_CFN(group_backward)(const PS_CFN(spin_ws) *ws, const PS_CFN(group) *g,
                                   size_t nt, size_t K, PS_REAL lam[3][PS_GW])
{
    if (K >= nt) {
        PS_CFN(group_sweep)(ws, g, nt, 0, nt, lam);
        return;
    }
    PS_REAL th[3][PS_GW], m[3][PS_GW];
    PS_REAL(*ckpt)[3][PS_GW] = (PS_REAL(*)[3][PS_GW])ws->ckpt;
    PS_REAL(*seg)[3][PS_GW] = (PS_REAL(*)[3][PS_GW])ws->seg;
    size_t nseg = (nt + K - 1) / K;
    for (size_t s = nseg; s-- > 0;) {
        size_t k0 = s * K, k1 = k0 + K < nt ? k0 + K : nt;
        PS_CFN(group_copy)(m, (const PS_REAL(*)[PS_GW])ckpt[s]);
        for (size_t k = k0; k < k1; k++) {
            PS_CFN(group_copy)(seg[k - k0], (const PS_REAL(*)[PS_GW])m);
            PS_CFN(group_theta)(ws, g, nt, k, th);
            PS_CFN(group_step)(g, (const PS_REAL(*)[PS_GW])th, m);
        }
        PS_CFN(group_sweep)(ws, g, nt, k0, k1, lam);
    }
}

/*
 * The spins of lanes [L0, L1) of nl (lane i: spins [i ns/nl, (i+1) ns/nl)),
 * in groups of PS_GW consecutive spins that may span lanes: each spin's
 * loss is added to lane_loss[its lane] and, if gacc, its gradient to
 * gacc + its lane nx (and r_a dL/dtheta_z to gaccg + its lane 3 nt, if
 * gaccg), in spin order. mout[ns][3] (may be NULL) receives M_Nt. u, v
 * [nc][nt], gdt [nt][3]; ckpt [nseg][3][PS_GW] and seg [K][3][PS_GW] the
 * states' room (spin_ws). gw (1..PS_GW) caps the spins of a group (the
 * same bits for every gw: ps_cpu_group_limit). Returns 0, or -1 when out
 * of memory.
 */
PS_FLUSH_NOINLINE /* called between ps_flush_begin and _end (cpu/fpmode.h) */
static int PS_CFN(lanes_eval)(const ps_problem *p, const PS_REAL *u, const PS_REAL *v,
                              const PS_REAL *gdt, PS_REAL *ckpt, PS_REAL *seg, size_t K,
                              size_t nl, size_t L0, size_t L1, double *gacc, size_t nx,
                              double *gaccg, double *mout, double *lane_loss, int gw)
{
    const size_t ns = p->ns, nt = p->nt, jend = L1 * ns / nl;
    size_t lane = L0;
    const PS_CFN(spin_ws) wss = {u, v, gdt, ckpt, seg}, *ws = &wss;
    PS_CFN(group) *g = malloc(sizeof *g); /* 17.7 KB (float; 34.8 KB double) */
    if (!g)
        return -1;
    g->relax = p->t1 || p->t2;
    g->nc = (int)p->nc;
    g->dg = gacc && gaccg;
    gw = gw < 1 ? 1 : gw > PS_GW ? PS_GW : gw;
    for (size_t j0 = L0 * ns / nl; j0 < jend; j0 += (size_t)gw) {
        double w[PS_GW], md[PS_GW][3], lamd[PS_GW][3];
        size_t lanes[PS_GW];
        PS_REAL m[3][PS_GW], lam[3][PS_GW];
        int back = 0;
        g->n = jend - j0 < (size_t)gw ? (int)(jend - j0) : gw;
        for (int l = 0; l < PS_GW; l++) {
            const size_t j = j0 + (size_t)(l < g->n ? l : g->n - 1);
            while (j >= (lane + 1) * ns / nl)
                lane++;
            lanes[l] = lane;
            ps_spin_consts c;
            ps_design_spin(p, j, &c);
            for (int i = 0; i < 3; i++) {
                g->r[i][l] = (PS_REAL)c.r[i];
                m[i][l] = (PS_REAL)c.m0[i];
            }
            for (int i = 0; i < g->nc; i++) {
                g->gS[i][0][l] = (PS_REAL)c.gS[i][0];
                g->gS[i][1][l] = (PS_REAL)c.gS[i][1];
            }
            g->wz[l] = (PS_REAL)c.wz;
            g->a1[l] = (PS_REAL)c.a1;
            g->a2[l] = (PS_REAL)c.a2;
            w[l] = c.w;
            const int adds = gacc && l < g->n && c.w != 0.0;
            g->ga[l] = adds ? gacc + lane * nx : NULL;
            g->gg[l] = adds && gaccg ? gaccg + lane * 3 * nt : NULL;
            back |= adds;
        }
        PS_CFN(group_forward)(ws, g, nt, K, m, gacc != NULL);
        for (int l = 0; l < g->n; l++) {
            const size_t j = j0 + (size_t)l;
            for (int i = 0; i < 3; i++)
                md[l][i] = m[i][l];
            lane_loss[lanes[l]] += ps_spin_loss((int)p->loss, w[l], md[l], p->target + 3 * j,
                                                lamd[l]);
            if (mout)
                for (int i = 0; i < 3; i++)
                    mout[3 * j + i] = md[l][i];
        }
        if (!back)
            continue;
        for (int l = 0; l < PS_GW; l++)
            for (int i = 0; i < 3; i++)
                lam[i][l] = g->ga[l] ? (PS_REAL)lamd[l][i] : (PS_REAL)0;
        PS_CFN(group_backward)(ws, g, nt, K, lam);
    }
    free(g);
    return 0;
}

#undef PS_GW
