/*
 * Precision template for model/bloch_math.h: included once per PS_REAL (float,
 * double) with PS_SFX naming the functions. No include guard on purpose.
 * It #undefs its parameters (PS_REAL, PS_SFX, PS_RSQRT, PS_RECIP_ROOT,
 * PS_RSINCOS, PS_FMA, PS_SERIES_TERMS, PS_MID_Q) at its end, so the includer only defines them.
 * The formulas are documented in model/bloch_math.h.
 */

/* Series of A, B, C in q (used for q < PS_SERIES_Q); the truncation
 * error at q = PS_SERIES_Q is below the precision's rounding unit. */
#if PS_SERIES_TERMS == 4
#define PS_SER_A(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-0.00019841269841269841), (PS_REAL)(0.0083333333333333332)), (PS_REAL)(-0.16666666666666666)), (PS_REAL)(1)))
#define PS_SER_B(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-2.4801587301587302e-05), (PS_REAL)(0.0013888888888888889)), (PS_REAL)(-0.041666666666666664)), (PS_REAL)(0.5)))
#define PS_SER_C(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-2.7557319223985893e-06), (PS_REAL)(0.0001984126984126984)), (PS_REAL)(-0.008333333333333333)), (PS_REAL)(0.16666666666666666)))
#else
#define PS_SER_A(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(2.8114572543455206e-15), (PS_REAL)(-7.6471637318198164e-13)), (PS_REAL)(1.6059043836821613e-10)), (PS_REAL)(-2.505210838544172e-08)), (PS_REAL)(2.7557319223985893e-06)), (PS_REAL)(-0.00019841269841269841)), (PS_REAL)(0.0083333333333333332)), (PS_REAL)(-0.16666666666666666)), (PS_REAL)(1)))
#define PS_SER_B(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(1.5619206968586225e-16), (PS_REAL)(-4.7794773323873853e-14)), (PS_REAL)(1.1470745597729725e-11)), (PS_REAL)(-2.08767569878681e-09)), (PS_REAL)(2.7557319223985888e-07)), (PS_REAL)(-2.4801587301587302e-05)), (PS_REAL)(0.0013888888888888889)), (PS_REAL)(-0.041666666666666664)), (PS_REAL)(0.5)))
#define PS_SER_C(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(8.22063524662433e-18), (PS_REAL)(-2.8114572543455206e-15)), (PS_REAL)(7.647163731819816e-13)), (PS_REAL)(-1.6059043836821613e-10)), (PS_REAL)(2.505210838544172e-08)), (PS_REAL)(-2.7557319223985893e-06)), (PS_REAL)(0.0001984126984126984)), (PS_REAL)(-0.008333333333333333)), (PS_REAL)(0.16666666666666666)))
#endif

/* float32 between PS_SERIES_Q and PS_MID_Q (1/4 <= phi^2 < 4): A, B and
 * C as polynomials in t = q - PS_MID_T0, cos(phi/2) and sin(phi/2)/phi in
 * q - PS_MID_H0 (the subtractions exact for q >= 1.06). Each is the
 * weighted least-squares fit over [1/4, 4] with its coefficients rounded
 * to float32 one at a time and the later ones refitted (degree 5 for A
 * and B, 4 for the others; below 5e-10 relative before rounding). The
 * two centres are floats where A and B (cos(phi/2) and sin(phi/2)/phi)
 * are within 0.012 ulp of floats, so that the constant terms are exact:
 * a rounded constant shifts every step near the centre the same way (a
 * Chebyshev interpolant with rounded coefficients moves the step's norm
 * c^2 + q A^2, which must be 1, by -2e-8 a step: -2e-5 over 1,000
 * steps). tools/rotation_poly.py makes them and checks them. Evaluated with fused
 * multiply-adds, every float32 q of the range (2^25, against float64)
 * gives A, B, C, cos(phi/2) and sin(phi/2)/phi within 1.3 units of 2^-24
 * relative and c = 1 - q B within 1.5 units absolute; c^2 + q A^2 - 1
 * has mean 7e-11, rms 4.2e-8 and no 1/8-wide stretch of q with a mean
 * past 5e-10 (sine and cosine: 3e-11, 7.3e-8, 1.1e-9), and the half
 * angle's rotation is unbiased likewise (5e-10 relative). That is as
 * close as sinf and cosf of a rounded phi (C = (1 - A)/q was up to 67
 * units off near q = 1/4), in a third of their operations and without
 * the slow path of a range reduction. tests/unit/test_model.c
 * (test_mid_range) samples 2^17 q against long double on the CPU. */
#ifdef PS_MID_Q
#define PS_MID_T0 2.1085867881774902
#define PS_MID_H0 2.077481985092163
#define PS_MID_A(t) (PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, (PS_REAL)(-2.2916156083852002e-08), (PS_REAL)(2.5026647563208826e-06)), (PS_REAL)(-0.0001762548490660265)), (PS_REAL)(0.007149434182792902)), (PS_REAL)(-0.13406915962696075)), (PS_REAL)(0.6838133335113525)))
#define PS_MID_B(t) (PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, (PS_REAL)(-1.8000740897861078e-09), (PS_REAL)(2.543167454405193e-07)), (PS_REAL)(-2.256865809613373e-05)), (PS_REAL)(0.001239159144461155)), (PS_REAL)(-0.036130163818597794)), (PS_REAL)(0.41809025406837463)))
#define PS_MID_C(t) (PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, (PS_REAL)(2.3741520749354095e-08), (PS_REAL)(-2.5521042061882326e-06)), (PS_REAL)(0.0001816327712731436)), (PS_REAL)(-0.007532425224781036)), (PS_REAL)(0.14995193481445312)))
#define PS_MID_QC(t) (PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, (PS_REAL)(9.384183385918732e-08), (PS_REAL)(-2.090855014102999e-05)), (PS_REAL)(0.0024713994935154915)), (PS_REAL)(-0.11445731669664383)), (PS_REAL)(0.7513613700866699)))
#define PS_MID_QH(t) (PS_FMA(t, PS_FMA(t, PS_FMA(t, PS_FMA(t, (PS_REAL)(5.163292016163723e-09), (PS_REAL)(-1.5057529481055099e-06)), (PS_REAL)(0.0002508943434804678)), (PS_REAL)(-0.019771190360188484)), (PS_REAL)(0.4578292667865753)))
#endif

/* The series branch of ps_rot_coeffs (q < PS_SERIES_Q): no branch and no
 * call, so that a loop over spins vectorizes (cpu/objective_tmpl.h takes
 * it for every spin and ps_rot_coeffs for those past it). */
PS_HD void PS_SFX(ps_rot_coeffs_series)(PS_REAL q, PS_REAL *c, PS_REAL *A, PS_REAL *B)
{
    *A = PS_SER_A(q);
    *B = PS_SER_B(q);
    *c = PS_FMA(-q, *B, (PS_REAL)1);
}

/* The same for ps_rot_coeffs_jac. */
PS_HD void PS_SFX(ps_rot_coeffs_jac_series)(PS_REAL q, PS_REAL *c, PS_REAL *A, PS_REAL *B,
                                            PS_REAL *C)
{
    *A = PS_SER_A(q);
    *B = PS_SER_B(q);
    *C = PS_SER_C(q);
    *c = PS_FMA(-q, *B, (PS_REAL)1);
}

#ifdef PS_MID_Q
/* The polynomial branch of ps_rot_coeffs (PS_SERIES_Q <= q < PS_MID_Q),
 * branch-free like the series for the CPU's vectorized loops. */
PS_HD void PS_SFX(ps_rot_coeffs_mid)(PS_REAL q, PS_REAL *c, PS_REAL *A, PS_REAL *B)
{
    PS_REAL t = q - (PS_REAL)PS_MID_T0;
    *A = PS_MID_A(t);
    *B = PS_MID_B(t);
    *c = PS_FMA(-q, *B, (PS_REAL)1);
}

/* The same for ps_rot_coeffs_jac. */
PS_HD void PS_SFX(ps_rot_coeffs_jac_mid)(PS_REAL q, PS_REAL *c, PS_REAL *A, PS_REAL *B,
                                         PS_REAL *C)
{
    PS_SFX(ps_rot_coeffs_mid)(q, c, A, B);
    *C = PS_MID_C(q - (PS_REAL)PS_MID_T0);
}
#endif

/* c = cos(phi), A = sin(phi)/phi, B = (1 - cos(phi))/phi^2 at q = phi^2. */
PS_HD void PS_SFX(ps_rot_coeffs)(PS_REAL q, PS_REAL *c, PS_REAL *A,
                                 PS_REAL *B)
{
    if (q < (PS_REAL)PS_SERIES_Q) {
        PS_SFX(ps_rot_coeffs_series)(q, c, A, B);
#ifdef PS_MID_Q
    } else if (q < (PS_REAL)PS_MID_Q) {
        PS_SFX(ps_rot_coeffs_mid)(q, c, A, B);
#endif
    } else {
#ifdef PS_RECIP_ROOT
        PS_REAL ri = PS_RECIP_ROOT(q), phi = q * ri, s, co;
        PS_RSINCOS(phi, &s, &co);
        *c = co;
        *A = s * ri;
        *B = ((PS_REAL)1 - co) * (ri * ri);
#else
        PS_REAL phi = PS_RSQRT(q), s, co;
        PS_RSINCOS(phi, &s, &co);
        *c = co;
        *A = s / phi;
        *B = ((PS_REAL)1 - co) / q;
#endif
    }
}

/* The same plus C = (1 - A)/q = (phi - sin(phi))/phi^3, the coefficient of
 * the rotation's Jacobian (model/bloch_math.h). */
PS_HD void PS_SFX(ps_rot_coeffs_jac)(PS_REAL q, PS_REAL *c, PS_REAL *A,
                                     PS_REAL *B, PS_REAL *C)
{
    if (q < (PS_REAL)PS_SERIES_Q) {
        PS_SFX(ps_rot_coeffs_jac_series)(q, c, A, B, C);
#ifdef PS_MID_Q
    } else if (q < (PS_REAL)PS_MID_Q) {
        PS_SFX(ps_rot_coeffs_jac_mid)(q, c, A, B, C);
#endif
    } else {
#ifdef PS_RECIP_ROOT
        PS_REAL ri = PS_RECIP_ROOT(q), phi = q * ri, s, co;
        PS_RSINCOS(phi, &s, &co);
        PS_REAL iq = ri * ri;
        *c = co;
        *A = s * ri;
        *B = ((PS_REAL)1 - co) * iq;
        *C = ((PS_REAL)1 - *A) * iq;
#else
        PS_REAL phi = PS_RSQRT(q), s, co;
        PS_RSINCOS(phi, &s, &co);
        *c = co;
        *A = s / phi;
        *B = ((PS_REAL)1 - co) / q;
        *C = ((PS_REAL)1 - *A) / q;
#endif
    }
}

/*
 * v <- a v + b (theta x v) + g theta (theta . v), the form of every 3x3 map
 * of one step: R(theta) is (c, -A, B), R^T (c, A, B), the rotation's
 * Jacobian J_s (A, s B, C) (s +1 on the side of the state after the
 * rotation, -1 before; model/bloch_math.h).
 */
PS_HD void PS_SFX(ps_rot_apply)(const PS_REAL th[3], PS_REAL a, PS_REAL b,
                                PS_REAL g, PS_REAL v[3])
{
    PS_REAL cx = PS_FMS(th[1], v[2], th[2] * v[1]); /* theta x v */
    PS_REAL cy = PS_FMS(th[2], v[0], th[0] * v[2]);
    PS_REAL cz = PS_FMS(th[0], v[1], th[1] * v[0]);
    PS_REAL gt = g * PS_DOT3(th[0], v[0], th[1], v[1], th[2], v[2]);
    v[0] = PS_FMA(gt, th[0], PS_FMA(b, cx, a * v[0]));
    v[1] = PS_FMA(gt, th[1], PS_FMA(b, cy, a * v[1]));
    v[2] = PS_FMA(gt, th[2], PS_FMA(b, cz, a * v[2]));
}

/* M <- R(theta) M (rotation only). */
PS_HD void PS_SFX(ps_rotate)(const PS_REAL th[3], PS_REAL m[3])
{
    PS_REAL c, A, B;
    PS_SFX(ps_rot_coeffs)(PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]), &c,
                          &A, &B);
    PS_SFX(ps_rot_apply)(th, c, -A, B, m);
}

/*
 * One full step: rotation, then relaxation if relax != 0, written with the
 * decrements a1 = 1 - exp(-dt/T1), a2 = 1 - exp(-dt/T2) (from expm1):
 *     Mxy -= a2 Mxy,   Mz -= a1 (Mz - 1)
 * The same map as Mxy *= E2, Mz = E1 Mz + 1 - E1, but a1 and a2 are small
 * and carry their full relative precision, so float32 does not apply a
 * rounded E2 (a systematic error of up to 2^-24) at every step.
 * ps_bloch_step_coeffs takes the rotation's coefficients (ps_rot_coeffs at
 * q = theta . theta) as given; ps_bloch_step computes them.
 */
PS_HD void PS_SFX(ps_bloch_step_coeffs)(const PS_REAL th[3], PS_REAL c, PS_REAL A,
                                        PS_REAL B, PS_REAL m[3], int relax, PS_REAL a1,
                                        PS_REAL a2)
{
    PS_SFX(ps_rot_apply)(th, c, -A, B, m);
    if (relax) {
        m[0] = PS_FMA(-a2, m[0], m[0]);
        m[1] = PS_FMA(-a2, m[1], m[1]);
        m[2] = PS_FMA(-a1, m[2] - (PS_REAL)1, m[2]);
    }
}

PS_HD void PS_SFX(ps_bloch_step)(const PS_REAL th[3], PS_REAL m[3],
                                 int relax, PS_REAL a1, PS_REAL a2)
{
    PS_REAL c, A, B;
    PS_SFX(ps_rot_coeffs)(PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]), &c,
                          &A, &B);
    PS_SFX(ps_bloch_step_coeffs)(th, c, A, B, m, relax, a1, a2);
}

/*
 * Adjoint of ps_bloch_step. m is M_{k-1} (before the step), lam holds
 * dL/dM_k on entry and dL/dM_{k-1} on exit; gth receives dL/dtheta, from
 * the state before the step (model/bloch_math.h):
 *     lam' = R^T mu,   dL/dtheta = J_- (lam' x M_{k-1})
 * ps_bloch_adjoint_coeffs takes the coefficients (ps_rot_coeffs_jac at
 * q = theta . theta) as given; ps_bloch_adjoint computes them.
 */
PS_HD void PS_SFX(ps_bloch_adjoint_coeffs)(const PS_REAL th[3], PS_REAL c, PS_REAL A,
                                           PS_REAL B, PS_REAL C, const PS_REAL m[3],
                                           PS_REAL lam[3], int relax, PS_REAL a1,
                                           PS_REAL a2, PS_REAL gth[3])
{
    PS_REAL mu0 = lam[0], mu1 = lam[1], mu2 = lam[2];
    if (relax) {
        mu0 = PS_FMA(-a2, mu0, mu0);
        mu1 = PS_FMA(-a2, mu1, mu1);
        mu2 = PS_FMA(-a1, mu2, mu2);
    }

    /* dL/dM_{k-1} = R^T mu */
    lam[0] = mu0;
    lam[1] = mu1;
    lam[2] = mu2;
    PS_SFX(ps_rot_apply)(th, c, A, B, lam);

    /* dL/dtheta = J_- (lam' x M_{k-1}) */
    gth[0] = PS_FMS(lam[1], m[2], lam[2] * m[1]);
    gth[1] = PS_FMS(lam[2], m[0], lam[0] * m[2]);
    gth[2] = PS_FMS(lam[0], m[1], lam[1] * m[0]);
    PS_SFX(ps_rot_apply)(th, A, -B, C, gth);
}

PS_HD void PS_SFX(ps_bloch_adjoint)(const PS_REAL th[3], const PS_REAL m[3],
                                    PS_REAL lam[3], int relax, PS_REAL a1,
                                    PS_REAL a2, PS_REAL gth[3])
{
    PS_REAL c, A, B, C;
    PS_SFX(ps_rot_coeffs_jac)(PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]), &c, &A, &B,
                              &C);
    PS_SFX(ps_bloch_adjoint_coeffs)(th, c, A, B, C, m, lam, relax, a1, a2, gth);
}

/*
 * Reverse step and adjoint together, for a backward sweep that recovers
 * the states instead of storing them: m holds M_k on entry and
 * M_{k-1} = R^T relax^-1(M_k) on exit, with b1 = exp(dt/T1) - 1 and
 * b2 = exp(dt/T2) - 1 (relax^-1: Mxy += b2 Mxy, Mz += b1 (Mz - 1)); lam and
 * gth as in ps_bloch_adjoint, dL/dtheta from the state after the rotation
 * r = relax^-1(M_k): dL/dtheta = J_+ (mu x r). R^T is formed once as a
 * matrix for its two products. Used over short segments only (the GPU
 * replays each segment from its exactly composed end state), so the
 * rounding of the inverse relaxation is not amplified over the whole pulse.
 */
PS_HD void PS_SFX(ps_bloch_reverse_adjoint)(const PS_REAL th[3], PS_REAL m[3],
                                            PS_REAL lam[3], int relax,
                                            PS_REAL a1, PS_REAL a2,
                                            PS_REAL b1, PS_REAL b2,
                                            PS_REAL gth[3])
{
    PS_REAL q = PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]);
    PS_REAL c, A, B, C;
    PS_SFX(ps_rot_coeffs_jac)(q, &c, &A, &B, &C);
    PS_REAL r0 = m[0], r1 = m[1], r2 = m[2];
    PS_REAL mu0 = lam[0], mu1 = lam[1], mu2 = lam[2];
    if (relax) {
        r0 = PS_FMA(b2, r0, r0);
        r1 = PS_FMA(b2, r1, r1);
        r2 = PS_FMA(b1, r2 - (PS_REAL)1, r2);
        mu0 = PS_FMA(-a2, mu0, mu0);
        mu1 = PS_FMA(-a2, mu1, mu1);
        mu2 = PS_FMA(-a1, mu2, mu2);
    }
    /* dL/dtheta = J_+ (mu x r) */
    gth[0] = PS_FMS(mu1, r2, mu2 * r1);
    gth[1] = PS_FMS(mu2, r0, mu0 * r2);
    gth[2] = PS_FMS(mu0, r1, mu1 * r0);
    PS_SFX(ps_rot_apply)(th, A, B, C, gth);

    /* R^T = c I + A [theta]_x + B theta theta^T, applied to r and mu */
    PS_REAL b0 = B * th[0], bb1 = B * th[1], bb2 = B * th[2];
    PS_REAL A0 = A * th[0], A1 = A * th[1], A2 = A * th[2];
    PS_REAL t00 = PS_FMA(b0, th[0], c), t01 = PS_FMA(b0, th[1], -A2), t02 = PS_FMA(b0, th[2], A1);
    PS_REAL t10 = PS_FMA(bb1, th[0], A2), t11 = PS_FMA(bb1, th[1], c), t12 = PS_FMA(bb1, th[2], -A0);
    PS_REAL t20 = PS_FMA(bb2, th[0], -A1), t21 = PS_FMA(bb2, th[1], A0), t22 = PS_FMA(bb2, th[2], c);
    m[0] = PS_DOT3(t00, r0, t01, r1, t02, r2);
    m[1] = PS_DOT3(t10, r0, t11, r1, t12, r2);
    m[2] = PS_DOT3(t20, r0, t21, r1, t22, r2);
    lam[0] = PS_DOT3(t00, mu0, t01, mu1, t02, mu2);
    lam[1] = PS_DOT3(t10, mu0, t11, mu1, t12, mu2);
    lam[2] = PS_DOT3(t20, mu0, t21, mu1, t22, mu2);
}

/*
 * Affine map of one step, composed onto T (3x4, row-major [R | t]):
 *     T <- E R(theta) T + (0, 0, a1),   E = diag(1 - a2, 1 - a2, 1 - a1)
 * so a segment's maps compose into one, M_end = T_lin M_start + T_t.
 */
PS_HD void PS_SFX(ps_affine_step)(const PS_REAL th[3], PS_REAL T[12], int relax,
                                  PS_REAL a1, PS_REAL a2)
{
    PS_REAL c, A, B;
    PS_SFX(ps_rot_coeffs)(PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]), &c,
                          &A, &B);
    /* R = c I - A [theta]_x + B theta theta^T */
    PS_REAL R[9], b0 = B * th[0], b1 = B * th[1], b2 = B * th[2];
    R[0] = PS_FMA(b0, th[0], c);
    R[1] = PS_FMA(b0, th[1], A * th[2]);
    R[2] = PS_FMA(b0, th[2], -A * th[1]);
    R[3] = PS_FMA(b1, th[0], -A * th[2]);
    R[4] = PS_FMA(b1, th[1], c);
    R[5] = PS_FMA(b1, th[2], A * th[0]);
    R[6] = PS_FMA(b2, th[0], A * th[1]);
    R[7] = PS_FMA(b2, th[1], -A * th[0]);
    R[8] = PS_FMA(b2, th[2], c);
    PS_REAL out[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = PS_DOT3(R[3 * i], T[j], R[3 * i + 1], T[4 + j],
                                     R[3 * i + 2], T[8 + j]);
    if (relax) {
        for (int j = 0; j < 4; j++) {
            out[j] = PS_FMA(-a2, out[j], out[j]);
            out[4 + j] = PS_FMA(-a2, out[4 + j], out[4 + j]);
            out[8 + j] = PS_FMA(-a1, out[8 + j], out[8 + j]);
        }
        out[11] += a1;
    }
    for (int j = 0; j < 12; j++)
        T[j] = out[j];
}

/*
 * Half-angle coefficients of the step's unit quaternion at q = phi^2:
 * C = cos(phi/2), H = sin(phi/2)/phi, so that R(theta) (rotation by -phi
 * about theta/phi) is the quaternion (C, -H theta).
 */
#if PS_SERIES_TERMS == 4
#define PS_SER_QC(u) (PS_FMA(u, PS_FMA(u, PS_FMA(u, (PS_REAL)(-0.0013888888888888889), (PS_REAL)(0.041666666666666664)), (PS_REAL)(-0.5)), (PS_REAL)(1)))
#define PS_SER_QH(u) (PS_FMA(u, PS_FMA(u, PS_FMA(u, (PS_REAL)(-9.9206349206349206e-05), (PS_REAL)(0.0041666666666666666)), (PS_REAL)(-0.083333333333333329)), (PS_REAL)(0.5)))
#else
#define PS_SER_QC(u) (PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, (PS_REAL)(4.7794773323873853e-14), (PS_REAL)(-1.1470745597729725e-11)), (PS_REAL)(2.08767569878681e-09)), (PS_REAL)(-2.7557319223985888e-07)), (PS_REAL)(2.4801587301587302e-05)), (PS_REAL)(-0.0013888888888888889)), (PS_REAL)(0.041666666666666664)), (PS_REAL)(-0.5)), (PS_REAL)(1)))
#define PS_SER_QH(u) (PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, PS_FMA(u, (PS_REAL)(1.4057286271727603e-15), (PS_REAL)(-3.8235818659099082e-13)), (PS_REAL)(8.0295219184108067e-11)), (PS_REAL)(-1.252605419272086e-08)), (PS_REAL)(1.3778659611992946e-06)), (PS_REAL)(-9.9206349206349206e-05)), (PS_REAL)(0.0041666666666666666)), (PS_REAL)(-0.083333333333333329)), (PS_REAL)(0.5)))
#endif

PS_HD void PS_SFX(ps_half_coeffs)(PS_REAL q, PS_REAL *C, PS_REAL *H)
{
    if (q < (PS_REAL)PS_SERIES_Q) {
        PS_REAL u = (PS_REAL)0.25 * q;
        *C = PS_SER_QC(u);
        *H = PS_SER_QH(u);
#ifdef PS_MID_Q
    } else if (q < (PS_REAL)PS_MID_Q) {
        PS_REAL t = q - (PS_REAL)PS_MID_H0;
        *C = PS_MID_QC(t);
        *H = PS_MID_QH(t);
#endif
    } else {
#ifdef PS_RECIP_ROOT
        PS_REAL ri = PS_RECIP_ROOT(q), s, co;
        PS_RSINCOS((PS_REAL)0.5 * (q * ri), &s, &co);
        *C = co;
        *H = s * ri;
#else
        PS_REAL phi = PS_RSQRT(q), s, co;
        PS_RSINCOS((PS_REAL)0.5 * phi, &s, &co);
        *C = co;
        *H = s / phi;
#endif
    }
}

/*
 * Compose one step onto the quaternion Qt (w, x, y, z): Qt <- q_step Qt,
 * with q_step = (C, -H theta). Rotations only (no relaxation).
 */
PS_HD void PS_SFX(ps_quat_step)(const PS_REAL th[3], PS_REAL Qt[4])
{
    PS_REAL C, H;
    PS_SFX(ps_half_coeffs)(PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]), &C, &H);
    PS_REAL bw = C, bx = -H * th[0], by = -H * th[1], bz = -H * th[2];
    PS_REAL aw = Qt[0], ax = Qt[1], ay = Qt[2], az = Qt[3];
    Qt[0] = PS_FMA(-bz, az, PS_FMA(-by, ay, PS_FMA(-bx, ax, bw * aw)));
    Qt[1] = PS_FMA(-bz, ay, PS_FMA(by, az, PS_FMA(bx, aw, bw * ax)));
    Qt[2] = PS_FMA(bz, ax, PS_FMA(by, aw, PS_FMA(-bx, az, bw * ay)));
    Qt[3] = PS_FMA(bz, aw, PS_FMA(-by, ax, PS_FMA(bx, ay, bw * az)));
}

/* Rotation matrix of a (nearly unit) quaternion into T (3x4, zero shift). */
PS_HD void PS_SFX(ps_quat_to_affine)(const PS_REAL Qt[4], PS_REAL T[12])
{
    PS_REAL w = Qt[0], x = Qt[1], y = Qt[2], z = Qt[3];
    PS_REAL s = (PS_REAL)2 / PS_FMA(z, z, PS_DOT3(w, w, x, x, y, y));
    T[0] = PS_FMA(-s, PS_FMA(z, z, y * y), (PS_REAL)1);
    T[1] = s * PS_FMS(x, y, w * z);
    T[2] = s * PS_FMA(w, y, x * z);
    T[3] = 0;
    T[4] = s * PS_FMA(w, z, x * y);
    T[5] = PS_FMA(-s, PS_FMA(z, z, x * x), (PS_REAL)1);
    T[6] = s * PS_FMS(y, z, w * x);
    T[7] = 0;
    T[8] = s * PS_FMS(x, z, w * y);
    T[9] = s * PS_FMA(w, x, y * z);
    T[10] = PS_FMA(-s, PS_FMA(y, y, x * x), (PS_REAL)1);
    T[11] = 0;
}

#undef PS_SER_QC
#undef PS_SER_QH

#undef PS_SER_A
#undef PS_SER_B
#undef PS_SER_C

#undef PS_MID_Q
#undef PS_MID_T0
#undef PS_MID_H0
#undef PS_MID_A
#undef PS_MID_B
#undef PS_MID_C
#undef PS_MID_QC
#undef PS_MID_QH

#undef PS_REAL
#undef PS_SFX
#undef PS_RSQRT
#undef PS_RECIP_ROOT
#undef PS_RSINCOS
#undef PS_FMA
#undef PS_SERIES_TERMS
