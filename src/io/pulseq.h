/*
 * Pulseq export (README "Export"): a designed pulse and its gradient
 * waveforms as a Pulseq sequence file, format version 1.4.2, one block
 * holding the RF of one transmit channel and the gradient of every axis
 * that is not zero. Pulseq has no dynamic parallel transmit: a problem of
 * Nc > 1 channels gives Nc files, one per channel, with the same gradients.
 *
 * Rasters: the RF on 1 us, the gradients and the block duration on 10 us.
 * The waveforms are piecewise constant over steps of dt (the Bloch model's
 * convention); each raster interval takes the mean of the waveform over
 * that interval (ps_pulseq_resample), so the area of the RF and of every
 * gradient axis (the k-space position) is exact at every raster boundary,
 * and a waveform whose dt is a multiple of the raster is kept sample for
 * sample. The waveform is zero after its end, n dt.
 *
 * Units: RF amplitude in Hz (|b1| gamma_bar), its phase in turns (the
 * complex pulse u + i v as the signal); gradients in Hz/m (G/cm gamma_bar
 * 100). Shapes are normalized (RF magnitude to [0, 1], gradients to
 * [-1, 1]) and written with the specification's compression: the
 * derivative of the shape, quantized to 1e-7 so that runs are exact, with
 * each run of two or more equal values written as the value twice and the
 * count of further repeats; a shape whose compressed form would not be
 * shorter is written uncompressed (as many values as samples).
 */
#ifndef PS_SRC_IO_PULSEQ_H
#define PS_SRC_IO_PULSEQ_H

#include <stddef.h>

#include "persolve.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rasters of the files written, s. */
#define PS_PULSEQ_RF_RASTER 1e-6
#define PS_PULSEQ_GRAD_RASTER 1e-5
#define PS_PULSEQ_BLOCK_RASTER 1e-5
#define PS_PULSEQ_ADC_RASTER 1e-7

/* The most samples a waveform of an exported file may have: 16.8 s on
 * the RF raster (a pulse longer than that is not an RF pulse, and its
 * arrays would take gigabytes). */
#define PS_PULSEQ_MAX_SAMPLES ((size_t)1 << 24)

/* Raster intervals that cover n steps of dt: ceil(n dt / raster), a
 * relative 1e-9 of slack against rounding; 0 when dt or raster is not
 * positive and finite, n is 0, or the count exceeds
 * PS_PULSEQ_MAX_SAMPLES. */
size_t ps_pulseq_raster_count(size_t n, double dt, double raster);

/*
 * out[i] = the mean over [i raster, (i+1) raster) of the waveform w that
 * is w[k] on [k dt, (k+1) dt) for k < n and 0 after n dt, for i <
 * nout = ps_pulseq_raster_count(n, dt, raster). PS_ERR_NULL, PS_ERR_DT
 * (dt or raster not positive and finite, or the count past
 * PS_PULSEQ_MAX_SAMPLES), PS_ERR_SIZE (nout not that count).
 */
int ps_pulseq_resample(const double *w, size_t n, double dt, double raster, double *out,
                       size_t nout);

/* The file of channel c of nc: path itself for one channel, else path with
 * "_chC" before a final ".seq" (appended when there is none). PS_ERR_SIZE
 * when buf[len] is too short. */
int ps_pulseq_channel_path(const char *path, size_t c, size_t nc, char *buf, size_t len);

/*
 * Write the pulse of x[ps_problem_nx(p)] (physical: the RF of every
 * channel, then the designed gradient axes' waveforms, as result files
 * hold them) with the gradient in effect (the problem's, its designed axes
 * from x) as Pulseq files: ps_pulseq_channel_path's names, each replaced
 * atomically. On error a message naming the file and the reason goes into
 * err[errlen]: PS_ERR_NULL, PS_ERR_NONFINITE (x not finite, or an
 * amplitude of the file past the double range), PS_ERR_DT (a pulse of
 * more than PS_PULSEQ_MAX_SAMPLES on a raster), PS_ERR_FILE (a file that
 * cannot be written, or a destination that is not a regular file: a
 * symbolic link, a device, a directory), PS_ERR_NO_MEMORY.
 */
int ps_pulseq_export(const char *path, const ps_problem *p, const double *x, char *err,
                     size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* PS_SRC_IO_PULSEQ_H */
