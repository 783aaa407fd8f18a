/*
 * Precision template for model/bloch_math.h: included once per PS_REAL (float,
 * double) with PS_SFX naming the functions. No include guard on purpose.
 * It #undefs its parameters (PS_REAL, PS_SFX, PS_RSQRT, PS_RECIP_ROOT,
 * PS_RSINCOS, PS_FMA, PS_SERIES_TERMS) at its end, so the includer only defines them.
 * The formulas are documented in model/bloch_math.h.
 */

/* Series of A, B, A', B' in q (used for q < PS_SERIES_Q); the truncation
 * error at q = PS_SERIES_Q is below the precision's rounding unit. */
#if PS_SERIES_TERMS == 4
#define PS_SER_A(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-0.00019841269841269841), (PS_REAL)(0.0083333333333333332)), (PS_REAL)(-0.16666666666666666)), (PS_REAL)(1)))
#define PS_SER_B(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-2.4801587301587302e-05), (PS_REAL)(0.0013888888888888889)), (PS_REAL)(-0.041666666666666664)), (PS_REAL)(0.5)))
#define PS_SER_AP(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(1.1022927689594357e-05), (PS_REAL)(-0.00059523809523809529)), (PS_REAL)(0.016666666666666666)), (PS_REAL)(-0.16666666666666666)))
#define PS_SER_BP(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(1.1022927689594355e-06), (PS_REAL)(-7.4404761904761911e-05)), (PS_REAL)(0.0027777777777777779)), (PS_REAL)(-0.041666666666666664)))
#else
#define PS_SER_A(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(2.8114572543455206e-15), (PS_REAL)(-7.6471637318198164e-13)), (PS_REAL)(1.6059043836821613e-10)), (PS_REAL)(-2.505210838544172e-08)), (PS_REAL)(2.7557319223985893e-06)), (PS_REAL)(-0.00019841269841269841)), (PS_REAL)(0.0083333333333333332)), (PS_REAL)(-0.16666666666666666)), (PS_REAL)(1)))
#define PS_SER_B(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(1.5619206968586225e-16), (PS_REAL)(-4.7794773323873853e-14)), (PS_REAL)(1.1470745597729725e-11)), (PS_REAL)(-2.08767569878681e-09)), (PS_REAL)(2.7557319223985888e-07)), (PS_REAL)(-2.4801587301587302e-05)), (PS_REAL)(0.0013888888888888889)), (PS_REAL)(-0.041666666666666664)), (PS_REAL)(0.5)))
#define PS_SER_AP(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-7.3985717219618967e-17), (PS_REAL)(2.2491658034764165e-14)), (PS_REAL)(-5.3530146122738714e-12)), (PS_REAL)(9.6354263020929685e-10)), (PS_REAL)(-1.2526054192720859e-07)), (PS_REAL)(1.1022927689594357e-05)), (PS_REAL)(-0.00059523809523809529)), (PS_REAL)(0.016666666666666666)), (PS_REAL)(-0.16666666666666666)))
#define PS_SER_BP(q) (PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, PS_FMA(q, (PS_REAL)(-3.6992858609809485e-18), (PS_REAL)(1.249536557486898e-15)), (PS_REAL)(-3.3456341326711696e-13)), (PS_REAL)(6.882447358637835e-11)), (PS_REAL)(-1.043837849393405e-08)), (PS_REAL)(1.1022927689594355e-06)), (PS_REAL)(-7.4404761904761911e-05)), (PS_REAL)(0.0027777777777777779)), (PS_REAL)(-0.041666666666666664)))
#endif

/* c = cos(phi), A = sin(phi)/phi, B = (1 - cos(phi))/phi^2 at q = phi^2. */
PS_HD void PS_SFX(ps_rot_coeffs)(PS_REAL q, PS_REAL *c, PS_REAL *A,
                                 PS_REAL *B)
{
    if (q < (PS_REAL)PS_SERIES_Q) {
        *A = PS_SER_A(q);
        *B = PS_SER_B(q);
        *c = PS_FMA(-q, *B, (PS_REAL)1);
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

/* The same plus the derivatives A' = dA/dq and B' = dB/dq. */
PS_HD void PS_SFX(ps_rot_coeffs_deriv)(PS_REAL q, PS_REAL *c, PS_REAL *A,
                                       PS_REAL *B, PS_REAL *Ap, PS_REAL *Bp)
{
    if (q < (PS_REAL)PS_SERIES_Q) {
        *A = PS_SER_A(q);
        *B = PS_SER_B(q);
        *Ap = PS_SER_AP(q);
        *Bp = PS_SER_BP(q);
        *c = PS_FMA(-q, *B, (PS_REAL)1);
    } else {
#ifdef PS_RECIP_ROOT
        PS_REAL ri = PS_RECIP_ROOT(q), phi = q * ri, s, co;
        PS_RSINCOS(phi, &s, &co);
        PS_REAL iq = ri * ri, inv2q = (PS_REAL)0.5 * iq;
        *c = co;
        *A = s * ri;
        *B = ((PS_REAL)1 - co) * iq;
#else
        PS_REAL phi = PS_RSQRT(q), s, co;
        PS_RSINCOS(phi, &s, &co);
        PS_REAL inv2q = (PS_REAL)0.5 / q;
        *c = co;
        *A = s / phi;
        *B = ((PS_REAL)1 - co) / q;
#endif
        *Ap = (co - *A) * inv2q;
        *Bp = (*A - (PS_REAL)2 * *B) * inv2q;
    }
}

/* M <- R(theta) M (rotation only). */
PS_HD void PS_SFX(ps_rotate)(const PS_REAL th[3], PS_REAL m[3])
{
    PS_REAL c, A, B;
    PS_SFX(ps_rot_coeffs)(PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]), &c,
                          &A, &B);
    PS_REAL tm = PS_DOT3(th[0], m[0], th[1], m[1], th[2], m[2]);
    PS_REAL cx = PS_FMS(th[1], m[2], th[2] * m[1]); /* theta x M */
    PS_REAL cy = PS_FMS(th[2], m[0], th[0] * m[2]);
    PS_REAL cz = PS_FMS(th[0], m[1], th[1] * m[0]);
    PS_REAL bt = B * tm;
    m[0] = PS_FMA(bt, th[0], PS_FMA(-A, cx, c * m[0]));
    m[1] = PS_FMA(bt, th[1], PS_FMA(-A, cy, c * m[1]));
    m[2] = PS_FMA(bt, th[2], PS_FMA(-A, cz, c * m[2]));
}

/*
 * One full step: rotation, then relaxation if relax != 0, written with the
 * decrements a1 = 1 - exp(-dt/T1), a2 = 1 - exp(-dt/T2) (from expm1):
 *     Mxy -= a2 Mxy,   Mz -= a1 (Mz - 1)
 * The same map as Mxy *= E2, Mz = E1 Mz + 1 - E1, but a1 and a2 are small
 * and carry their full relative precision, so float32 does not apply a
 * rounded E2 (a systematic error of up to 2^-24) at every step.
 */
PS_HD void PS_SFX(ps_bloch_step)(const PS_REAL th[3], PS_REAL m[3],
                                 int relax, PS_REAL a1, PS_REAL a2)
{
    PS_SFX(ps_rotate)(th, m);
    if (relax) {
        m[0] = PS_FMA(-a2, m[0], m[0]);
        m[1] = PS_FMA(-a2, m[1], m[1]);
        m[2] = PS_FMA(-a1, m[2] - (PS_REAL)1, m[2]);
    }
}

/*
 * Adjoint of ps_bloch_step. m is M_{k-1} (before the step), lam holds
 * dL/dM_k on entry and dL/dM_{k-1} on exit; gth receives dL/dtheta.
 */
PS_HD void PS_SFX(ps_bloch_adjoint)(const PS_REAL th[3], const PS_REAL m[3],
                                    PS_REAL lam[3], int relax, PS_REAL a1,
                                    PS_REAL a2, PS_REAL gth[3])
{
    PS_REAL mu0 = lam[0], mu1 = lam[1], mu2 = lam[2];
    if (relax) {
        mu0 = PS_FMA(-a2, mu0, mu0);
        mu1 = PS_FMA(-a2, mu1, mu1);
        mu2 = PS_FMA(-a1, mu2, mu2);
    }
    PS_REAL q = PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]);
    PS_REAL c, A, B, Ap, Bp;
    PS_SFX(ps_rot_coeffs_deriv)(q, &c, &A, &B, &Ap, &Bp);

    PS_REAL tm = PS_DOT3(th[0], m[0], th[1], m[1], th[2], m[2]); /* theta.M */
    PS_REAL tu = PS_DOT3(th[0], mu0, th[1], mu1, th[2], mu2);    /* theta.mu */
    PS_REAL um = PS_DOT3(mu0, m[0], mu1, m[1], mu2, m[2]);       /* mu.M */
    PS_REAL xx = PS_FMS(m[1], mu2, m[2] * mu1);                  /* M x mu */
    PS_REAL xy = PS_FMS(m[2], mu0, m[0] * mu2);
    PS_REAL xz = PS_FMS(m[0], mu1, m[1] * mu0);
    PS_REAL txm = PS_DOT3(th[0], xx, th[1], xy, th[2], xz);      /* theta.(M x mu) */

    /* dL/dtheta */
    PS_REAL s = (PS_REAL)2 * PS_FMA(Bp * tu, tm, PS_FMA(-Ap, txm, -(PS_REAL)0.5 * A * um));
    gth[0] = PS_FMA(B, PS_FMA(tu, m[0], tm * mu0), PS_FMA(-A, xx, s * th[0]));
    gth[1] = PS_FMA(B, PS_FMA(tu, m[1], tm * mu1), PS_FMA(-A, xy, s * th[1]));
    gth[2] = PS_FMA(B, PS_FMA(tu, m[2], tm * mu2), PS_FMA(-A, xz, s * th[2]));

    /* dL/dM_{k-1} = R^T mu = c mu + A (theta x mu) + B theta (theta.mu) */
    PS_REAL cx = PS_FMS(th[1], mu2, th[2] * mu1);
    PS_REAL cy = PS_FMS(th[2], mu0, th[0] * mu2);
    PS_REAL cz = PS_FMS(th[0], mu1, th[1] * mu0);
    PS_REAL bu = B * tu;
    lam[0] = PS_FMA(bu, th[0], PS_FMA(A, cx, c * mu0));
    lam[1] = PS_FMA(bu, th[1], PS_FMA(A, cy, c * mu1));
    lam[2] = PS_FMA(bu, th[2], PS_FMA(A, cz, c * mu2));
}

/*
 * Reverse step and adjoint together, for a backward sweep that recovers
 * the states instead of storing them: m holds M_k on entry and
 * M_{k-1} = R^T relax^-1(M_k) on exit, with b1 = exp(dt/T1) - 1 and
 * b2 = exp(dt/T2) - 1 (relax^-1: Mxy += b2 Mxy, Mz += b1 (Mz - 1)); lam and
 * gth as in ps_bloch_adjoint. Used over short segments only (the GPU replays
 * each segment from its exactly composed end state), so the rounding of
 * the inverse relaxation is not amplified over the whole pulse.
 */
PS_HD void PS_SFX(ps_bloch_reverse_adjoint)(const PS_REAL th[3], PS_REAL m[3],
                                            PS_REAL lam[3], int relax,
                                            PS_REAL a1, PS_REAL a2,
                                            PS_REAL b1, PS_REAL b2,
                                            PS_REAL gth[3])
{
    PS_REAL q = PS_DOT3(th[0], th[0], th[1], th[1], th[2], th[2]);
    PS_REAL c, A, B, Ap, Bp;
    PS_SFX(ps_rot_coeffs_deriv)(q, &c, &A, &B, &Ap, &Bp);
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
    /* M_{k-1} = R^T r = c r + A (theta x r) + B theta (theta.r) */
    PS_REAL tr = PS_DOT3(th[0], r0, th[1], r1, th[2], r2);
    PS_REAL btr = B * tr;
    PS_REAL m0 = PS_FMA(btr, th[0], PS_FMA(A, PS_FMS(th[1], r2, th[2] * r1), c * r0));
    PS_REAL m1 = PS_FMA(btr, th[1], PS_FMA(A, PS_FMS(th[2], r0, th[0] * r2), c * r1));
    PS_REAL m2 = PS_FMA(btr, th[2], PS_FMA(A, PS_FMS(th[0], r1, th[1] * r0), c * r2));
    m[0] = m0;
    m[1] = m1;
    m[2] = m2;

    PS_REAL tm = PS_DOT3(th[0], m0, th[1], m1, th[2], m2);
    PS_REAL tu = PS_DOT3(th[0], mu0, th[1], mu1, th[2], mu2);
    PS_REAL um = PS_DOT3(mu0, m0, mu1, m1, mu2, m2);
    PS_REAL xx = PS_FMS(m1, mu2, m2 * mu1);
    PS_REAL xy = PS_FMS(m2, mu0, m0 * mu2);
    PS_REAL xz = PS_FMS(m0, mu1, m1 * mu0);
    PS_REAL txm = PS_DOT3(th[0], xx, th[1], xy, th[2], xz);
    PS_REAL s = (PS_REAL)2 * PS_FMA(Bp * tu, tm, PS_FMA(-Ap, txm, -(PS_REAL)0.5 * A * um));
    gth[0] = PS_FMA(B, PS_FMA(tu, m0, tm * mu0), PS_FMA(-A, xx, s * th[0]));
    gth[1] = PS_FMA(B, PS_FMA(tu, m1, tm * mu1), PS_FMA(-A, xy, s * th[1]));
    gth[2] = PS_FMA(B, PS_FMA(tu, m2, tm * mu2), PS_FMA(-A, xz, s * th[2]));

    PS_REAL bu = B * tu;
    lam[0] = PS_FMA(bu, th[0], PS_FMA(A, PS_FMS(th[1], mu2, th[2] * mu1), c * mu0));
    lam[1] = PS_FMA(bu, th[1], PS_FMA(A, PS_FMS(th[2], mu0, th[0] * mu2), c * mu1));
    lam[2] = PS_FMA(bu, th[2], PS_FMA(A, PS_FMS(th[0], mu1, th[1] * mu0), c * mu2));
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
#undef PS_SER_AP
#undef PS_SER_BP

#undef PS_REAL
#undef PS_SFX
#undef PS_RSQRT
#undef PS_RECIP_ROOT
#undef PS_RSINCOS
#undef PS_FMA
#undef PS_SERIES_TERMS
