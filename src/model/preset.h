/*
 * What the presets (model/preset.c) share with the command line: the
 * numbers their parameters accept.
 */
#ifndef PS_SRC_PRESET_H
#define PS_SRC_PRESET_H

/* Whether s is a plain decimal number: [+-]digits[.digits][(e|E)[+-]digits],
 * with a digit before the exponent (no spaces, hexadecimal, inf or nan):
 * the numbers preset parameters and command-line options accept. */
int ps_is_decimal(const char *s);

#endif /* PS_SRC_PRESET_H */
