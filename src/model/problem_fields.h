/*
 * The fields of a problem, listed once. struct ps_problem (model/problem.h)
 * is built from these lists, and validation, creation, describe and free
 * (model/problem.c), the checkpoint's problem hash (opt/checkpoint.c) and
 * the HDF5 reader and writer (io/h5io.c) expand them. A new field is a new
 * row here, its member in ps_problem_desc (include/persolve.h; problem.c
 * checks that the two agree) and, for a scalar, its rule in
 * ps_problem_validate. A new row changes the problem hash that checkpoints
 * store (even an absent optional array is hashed, as a presence tag), so it
 * comes with a new PS_CHECKPOINT_VERSION (opt/checkpoint.h).
 */
#ifndef PS_SRC_PROBLEM_FIELDS_H
#define PS_SRC_PROBLEM_FIELDS_H

/* Whether a field must be given. */
enum {
    PS_FIELD_REQUIRED,  /* an array never NULL; a scalar a file must have */
    PS_FIELD_OPTIONAL,  /* an array NULL when absent (the model's default);
                         * a scalar unset when not finite (b1_max's
                         * PS_B1MAX_NONE), which a file leaves out */
    PS_FIELD_DEFAULTED, /* a scalar a file may leave out: then the default
                         * of ps_problem_desc_init; a problem always has one */
    PS_FIELD_START,     /* the start pulse: NULL in a description gives
                         * zeros, which the problem holds; it is not part of
                         * the problem's hash, and a result file writes the
                         * solution in its place */
    PS_FIELD_EXTRA,     /* an optional array added after the checkpoint
                         * format's problem hash was fixed: hashed only when
                         * present, so that problems without it keep their
                         * hash (and their checkpoints resume) */
};

/* How an array's rows relate to the transmit channels (nc of the problem;
 * 0 in a description stands for 1). */
enum {
    PS_CH_NONE,  /* [rows][width] */
    PS_CH_INNER, /* [rows][nc][width] */
    PS_CH_OUTER, /* [nc][rows][width] */
    PS_CH_SQUARE, /* [rows][nc][nc][width] (a matrix over the channels per row) */
};

/* Channels of a description or a problem s: nc, 0 meaning 1. */
#define PS_NC_OF(s) ((s)->nc ? (s)->nc : (size_t)1)

/* Elements of an array of the lists in s (a description or a problem). */
#define PS_FIELD_COUNT(s, rows, width, channels)                              \
    ((s)->rows * (size_t)(width) *                                            \
     ((channels) == PS_CH_NONE     ? (size_t)1                                \
      : (channels) == PS_CH_SQUARE ? PS_NC_OF(s) * PS_NC_OF(s)                \
                                   : PS_NC_OF(s)))

/* What validation asks of every element, beyond being finite. */
enum {
    PS_RULE_FINITE,      /* nothing more */
    PS_RULE_NONNEGATIVE, /* >= 0, else PS_ERR_NEGATIVE */
    PS_RULE_RELAXATION,  /* > 0 (a relaxation time), else PS_ERR_RELAXATION */
    PS_RULE_MASK,        /* 0 or 1, else PS_ERR_RF_MASK */
};

/*
 * The arrays, in the order they are validated, copied and hashed:
 *
 *   X(name, rows, width, channels, presence, rule, group, dataset, label)
 *
 * name     the member of ps_problem_desc and ps_problem, and its name in
 *          validation messages ("df[12] is NaN")
 * rows     ns (a row per spin), nt (a row per time step) or nq (a row per
 *          VOP): the member that counts the rows
 * width    values per row: [rows][width], row-major ([rows] when 1)
 * channels PS_CH_NONE: [rows][width]; PS_CH_INNER: [rows][nc][width] (a row
 *          per spin, the channels inside); PS_CH_OUTER: [nc][rows][width]
 *          (channel-major, as the unknowns are); PS_CH_SQUARE:
 *          [rows][nc][nc][width]
 * presence PS_FIELD_REQUIRED, PS_FIELD_OPTIONAL, PS_FIELD_START or
 *          PS_FIELD_EXTRA
 * rule     PS_RULE_FINITE, PS_RULE_NONNEGATIVE or PS_RULE_RELAXATION
 * group    the HDF5 group: spins, pulse or sar (the dataset is /group/dataset)
 * dataset  its name in the group
 * label    how the message of a missing required array names it
 */
#define PS_PROBLEM_ARRAYS(X)                                                   \
    /* positions, cm */                                                        \
    X(r, ns, 3, PS_CH_NONE, PS_FIELD_REQUIRED, PS_RULE_FINITE, spins, "r",                 \
      "r (spin positions)")                                                    \
    /* target magnetization */                                                 \
    X(target, ns, 3, PS_CH_NONE, PS_FIELD_REQUIRED, PS_RULE_FINITE, spins, "target",       \
      "target")                                                                \
    /* off-resonance, Hz (absent: 0) */                                        \
    X(df, ns, 1, PS_CH_NONE, PS_FIELD_OPTIONAL, PS_RULE_FINITE, spins, "df", "df")         \
    /* B1 scale s_j of the one channel (absent: 1; not with b1map) */                                             \
    X(b1scale, ns, 1, PS_CH_NONE, PS_FIELD_OPTIONAL, PS_RULE_FINITE, spins, "b1",          \
      "b1scale")                                                               \
    /* weights (absent: 1) */                                                  \
    X(w, ns, 1, PS_CH_NONE, PS_FIELD_OPTIONAL, PS_RULE_NONNEGATIVE, spins, "w", "w")       \
    /* start magnetization (absent: (0, 0, 1)) */                              \
    X(m0, ns, 3, PS_CH_NONE, PS_FIELD_OPTIONAL, PS_RULE_FINITE, spins, "m0", "m0")         \
    /* T1, s (absent: no T1 relaxation) */                                     \
    X(t1, ns, 1, PS_CH_NONE, PS_FIELD_OPTIONAL, PS_RULE_RELAXATION, spins, "t1", "t1")     \
    /* T2, s (absent: no T2 relaxation) */                                     \
    X(t2, ns, 1, PS_CH_NONE, PS_FIELD_OPTIONAL, PS_RULE_RELAXATION, spins, "t2", "t2")     \
    /* complex B1+ sensitivity S_jc of every channel (Re, Im; absent: the \
     * one channel with S_j1 = b1scale_j) */                                 \
    X(b1map, ns, 2, PS_CH_INNER, PS_FIELD_EXTRA, PS_RULE_FINITE, spins,       \
      "b1map", "b1map")                                                      \
    /* gradient waveform, G/cm */                                              \
    X(g, nt, 3, PS_CH_NONE, PS_FIELD_REQUIRED, PS_RULE_FINITE, pulse, "g",                 \
      "g (gradient waveform)")                                                 \
    /* start pulse (u, v) of every channel, G */                                                \
    X(b1, nt, 2, PS_CH_OUTER, PS_FIELD_START, PS_RULE_FINITE, pulse, "b1", "b1")                \
    /* local SAR VOPs Q_q (Re, Im), W/kg per G^2 (absent: no SAR limit; \
     * Hermitian and positive semidefinite: ps_problem_validate) */           \
    X(vop, nq, 2, PS_CH_SQUARE, PS_FIELD_EXTRA, PS_RULE_FINITE, sar, "vop", "vop") \
    /* RF mask: 1 where the RF is free, 0 where it is held at zero (absent: \
     * free everywhere) */                                                    \
    X(rf_mask, nt, 1, PS_CH_NONE, PS_FIELD_EXTRA, PS_RULE_MASK, pulse, "rf_mask", "rf_mask")

/*
 * The real scalars (the loss type is the one other scalar), in the order
 * they are hashed and read from the HDF5 file's root attributes of the same
 * names:
 *
 *   X(name, presence)
 *
 * presence PS_FIELD_REQUIRED, PS_FIELD_DEFAULTED or PS_FIELD_OPTIONAL
 */
#define PS_PROBLEM_REALS(X)                                                    \
    X(dt, PS_FIELD_REQUIRED)         /* time step, s */                        \
    X(gamma_bar, PS_FIELD_DEFAULTED) /* Hz/G */                                \
    X(lambda, PS_FIELD_DEFAULTED)    /* RF power penalty weight */             \
    X(b1_max, PS_FIELD_OPTIONAL)     /* peak |b1|, G, or PS_B1MAX_NONE */

#endif /* PS_SRC_PROBLEM_FIELDS_H */
