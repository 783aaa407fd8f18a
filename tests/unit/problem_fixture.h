/*
 * A small problem description with every optional array, in storage of
 * its own, and its arrays by name: the tests of problem creation,
 * validation and hashing fill the values and change one field at a time.
 */
#ifndef PS_TESTS_PROBLEM_FIXTURE_H
#define PS_TESTS_PROBLEM_FIXTURE_H

#include <stddef.h>
#include <string.h>

#include "persolve.h"

enum { NS = 3, NT = 4 };

typedef struct base {
    double r[3 * NS], target[3 * NS], df[NS], b1scale[NS], w[NS], m0[3 * NS];
    double t1[NS], t2[NS], g[3 * NT], b1[2 * NT];
    ps_problem_desc d;
} base;

/* b->d: the defaults of ps_problem_desc_init, the sizes and every array
 * (the scalars are the caller's). */
static inline void base_wire(base *b)
{
    ps_problem_desc_init(&b->d);
    b->d.ns = NS;
    b->d.nt = NT;
    b->d.r = b->r;
    b->d.target = b->target;
    b->d.df = b->df;
    b->d.b1scale = b->b1scale;
    b->d.w = b->w;
    b->d.m0 = b->m0;
    b->d.t1 = b->t1;
    b->d.t2 = b->t2;
    b->d.g = b->g;
    b->d.b1 = b->b1;
}

/* The arrays of a desc by name, with their lengths and widths. */
typedef struct array_ref {
    const char *name;
    double *a;
    size_t n, width;
} array_ref;

/* Fills out[] (room for 16) in the order of ps_problem_desc; the count. */
static inline size_t arrays_of(base *b, array_ref *out)
{
    array_ref list[] = {
        {"r", b->r, 3 * NS, 3}, {"target", b->target, 3 * NS, 3},
        {"df", b->df, NS, 1},   {"b1scale", b->b1scale, NS, 1},
        {"w", b->w, NS, 1},     {"m0", b->m0, 3 * NS, 3},
        {"t1", b->t1, NS, 1},   {"t2", b->t2, NS, 1},
        {"g", b->g, 3 * NT, 3}, {"b1", b->b1, 2 * NT, 2},
    };
    memcpy(out, list, sizeof list);
    return sizeof list / sizeof list[0];
}

#endif /* PS_TESTS_PROBLEM_FIXTURE_H */
