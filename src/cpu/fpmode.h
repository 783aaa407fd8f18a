/*
 * Subnormal numbers in the CPU backend's float32 spin loops.
 *
 * A float32 operation whose operand or result is subnormal (below 1.2e-38)
 * costs a microcode assist on x86, about a hundred cycles instead of a few.
 * The spin loops meet such values as a matter of course: an iterate's
 * pulse sample of 1e-20 G (where the gradient is almost nothing) makes a
 * rotation component near 1e-21 rad, whose square in phi^2 is subnormal.
 * Measured on a 2-core AMD EPYC (README, Measured figures, CPU): an
 * iteration of `bench` size M took 10.6 s with them, 2.5 s flushed.
 *
 * ps_flush_begin() makes the calling thread treat subnormal operands as
 * zero and flush subnormal results to zero (x86-64: MXCSR DAZ and FTZ;
 * AArch64: FPCR.FZ) and returns the mode it found; ps_flush_end() restores
 * that mode and nothing else (the exception flags raised in between stay
 * raised). Each thread that runs float32 spin loops brackets them with the
 * pair: the mode is per thread, and the caller's own mode is never left
 * changed. The mode covers float64 arithmetic too (the lanes' loss and
 * gradient sums): values below 2.2e-308 there. The work between the two
 * must be a call of a PS_FLUSH_NOINLINE function: the compiler does not
 * keep register arithmetic from moving across a mode change, it keeps a
 * call. Elsewhere (other architectures, x87 float math) both do nothing
 * and PS_FLUSH_SUPPORTED is 0; PS_FLUSH_MXCSR is defined where the mode
 * is x86's MXCSR. The GPU keeps IEEE subnormals in float32
 * (nvcc -ftz=false) at full speed; the two differ only where a value below
 * 1.2e-38 reaches a result, far below float32's rounding of the
 * quantities it is added to.
 */
#ifndef PS_CPU_FPMODE_H
#define PS_CPU_FPMODE_H

#if defined(__GNUC__)
#define PS_FLUSH_NOINLINE __attribute__((noinline))
#else
#define PS_FLUSH_NOINLINE
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__SSE2_MATH__)
#include <xmmintrin.h>
#define PS_FLUSH_SUPPORTED 1
#define PS_FLUSH_MXCSR 1 /* the mode and the flags are the MXCSR's */
#define PS_FLUSH_BITS 0x8040u /* MXCSR FTZ (bit 15) and DAZ (bit 6) */
static inline unsigned ps_flush_begin(void)
{
    const unsigned old = _mm_getcsr();
    _mm_setcsr(old | PS_FLUSH_BITS);
    return old;
}
static inline void ps_flush_end(unsigned old)
{
    _mm_setcsr((_mm_getcsr() & ~PS_FLUSH_BITS) | (old & PS_FLUSH_BITS));
}
#elif defined(__aarch64__)
#define PS_FLUSH_SUPPORTED 1
#define PS_FLUSH_BITS (1ull << 24) /* FPCR.FZ */
static inline unsigned long long ps_flush_fpcr(void)
{
    unsigned long long v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v)::"memory");
    return v;
}
static inline unsigned ps_flush_begin(void)
{
    const unsigned long long old = ps_flush_fpcr();
    __asm__ __volatile__("msr fpcr, %0" ::"r"(old | PS_FLUSH_BITS) : "memory");
    return (unsigned)(old & PS_FLUSH_BITS ? 1u : 0u);
}
static inline void ps_flush_end(unsigned old)
{
    const unsigned long long v = ps_flush_fpcr();
    __asm__ __volatile__("msr fpcr, %0" ::"r"(old ? v | PS_FLUSH_BITS : v & ~PS_FLUSH_BITS) : "memory");
}
#else
#define PS_FLUSH_SUPPORTED 0
static inline unsigned ps_flush_begin(void)
{
    return 0u;
}
static inline void ps_flush_end(unsigned old)
{
    (void)old;
}
#endif

#endif
