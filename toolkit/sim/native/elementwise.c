/* NPU_OP_ELEMENTWISE from the IFM and IFM2 in memory to the OFM in memory, with the output
 * stage, in one call: the same integer arithmetic as elementwise.py and alu.py, which are the
 * reference. Python packs elementwise_desc when it plans the program (native/elementwise.py). */
#include "native.h"

enum { MUL, ADD, SUB, MIN, MAX, LRELU, ABS, CLZ, SHR, SHL }; /* elementwise.MODES */
enum { SCALE_16BIT = 0, SCALE_OPA_32BIT = 1, SCALE_OPB_32BIT = 2 };
#define INPUT_SHIFT_8BIT 20

typedef struct { /* native/elementwise.py's elementwise_kernel packs it */
    fmap ifm, ifm2, ofm; /* ifm2 is read only when has_ifm2 (else `scalar`, or nothing) */
    int64_t mode, has_ifm2, scalar, reversed;
    /* elementwise.OperandScales: 16-bit multipliers (1 and 1 but for ADD/SUB), or which
     * operand the 32-bit operand scale (a Rescale) takes */
    int64_t operand_mode, opa, opb, op_scale, op_shift, op_right, op_rounding;
    /* the OFM's Rescale; negative_only: LRELU's (alu.NegativeRescale) */
    int64_t scale, shift, right, negative_only;
    finish_desc finish;
} elementwise_desc;

/* OperandScales.functions of n values of one operand (`b`: 0 A, 1 B) in place, zero point
 * already subtracted */
static void scale_operand(const elementwise_desc *d, int64_t *x, size_t n, int b) {
    if (d->operand_mode == SCALE_16BIT) {
        int64_t k = b ? d->opb : d->opa;
        if (k != 1)
            for (size_t i = 0; i < n; i++) x[i] *= k;
    } else if ((d->operand_mode == SCALE_OPB_32BIT) == b) { /* Python checked: below 2^61 */
        for (size_t i = 0; i < n; i++) x[i] *= (int64_t)1 << INPUT_SHIFT_8BIT;
        rescale_values(x, n, d->op_scale, d->op_shift, d->op_right, d->op_rounding, 0);
    } else {
        for (size_t i = 0; i < n; i++) x[i] *= (int64_t)1 << (INPUT_SHIFT_8BIT - 1);
    }
}

static inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* elementwise._combine's operations and alu.py's, on int64 as numpy does them */
static inline int64_t combine(int64_t mode, int64_t a, int64_t b) {
    switch (mode) {
    case MUL: return (int64_t)((uint64_t)a * (uint64_t)b); /* wraps as numpy's int64 product */
    case ADD: return a + b;
    case SUB: return a - b;
    case MIN: return a < b ? a : b;
    case MAX: return a > b ? a : b;
    case ABS: return a < 0 ? -a : a;
    case CLZ: { /* alu.clz32: of the 32-bit pattern */
        uint32_t u = (uint32_t)a;
        return u ? __builtin_clz(u) : 32;
    }
    case SHR: { /* alu.shift_right, NATURAL rounding (the only one planning lets through) */
        int64_t n = clamp64(b, 0, 62);
        return (a + (n > 0 ? (int64_t)1 << (n - 1) : 0)) >> n;
    }
    case SHL: return (int64_t)((uint64_t)a << clamp64(b, 0, 31)); /* alu.shift_left, wrapping */
    default: return a; /* LRELU: alpha is the rescale of the negative values */
    }
}

/* The accumulators over a (the IFM, in place) and b (the IFM2 or the scalar, at steps sy, sx,
 * sc: 0 along a broadcast axis), both scaled. The description is copied first: the compiler
 * then knows that the stores into a leave it alone. */
HOT static void combine_all(const elementwise_desc *desc, int64_t *restrict a,
                            const int64_t *restrict b, int64_t sy, int64_t sx, int64_t sc) {
    const elementwise_desc copy = *desc, *d = &copy;
    int64_t h = d->ofm.height, w = d->ofm.width, c = d->ofm.depth;
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++, a += c) {
            const int64_t *b_pixel = b + y * sy + x * sx;
            for (int64_t ch = 0; ch < c; ch++) {
                int64_t ifm = a[ch], ifm2 = b_pixel[ch * sc];
                a[ch] = d->reversed ? combine(d->mode, ifm2, ifm) : combine(d->mode, ifm, ifm2);
            }
        }
    }
}

/* One elementwise operation (elementwise.prepare_elementwise's run). Returns 0, or -1 when
 * out of memory. Both operands are read before the OFM is written, as numpy does. */
static int elementwise(const elementwise_desc *d, const uint8_t *ifm_mem,
                       const uint8_t *ifm2_mem, uint8_t *ofm_mem, const uint8_t *lut_mem) {
    const fmap *ofm = &d->ofm, *f2 = &d->ifm2;
    size_t n = (size_t)(ofm->height * ofm->width * ofm->depth);
    size_t n2 = d->has_ifm2 ? (size_t)(f2->height * f2->width * f2->depth) : 1;
    int64_t *a = malloc((n ? n : 1) * sizeof(int64_t));
    int64_t *b = malloc((n2 ? n2 : 1) * sizeof(int64_t));
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    read_map(ifm_mem, &d->ifm, ofm->depth, a);
    if (d->has_ifm2) read_map(ifm2_mem, f2, f2->depth, b);
    else b[0] = d->scalar;
    /* reversed: the IFM is operand B */
    scale_operand(d, a, n, d->reversed ? 1 : 0);
    scale_operand(d, b, n2, d->reversed ? 0 : 1);
    int64_t sy = d->has_ifm2 && f2->height > 1 ? f2->width * f2->depth : 0;
    int64_t sx = d->has_ifm2 && f2->width > 1 ? f2->depth : 0;
    int64_t sc = d->has_ifm2 && f2->depth > 1 ? 1 : 0;
    combine_all(d, a, b, sy, sx, sc);
    rescale_values(a, n, d->scale, d->shift, d->right, d->finish.rounding, d->negative_only);
    write_map(ofm_mem, ofm, &d->finish, a, lut_mem);
    free(a);
    free(b);
    return 0;
}

/* Whether the description stays inside the IFM's, IFM2's, OFM's and LUT's memories
 * (native.h): the IFM read with the OFM's depth over at most the OFM's pixels, an IFM2 of the
 * OFM's shape or broadcast (1) along each axis. */
static int elementwise_fits(const elementwise_desc *d, const int64_t sizes[4]) {
    const fmap *ofm = &d->ofm, *f1 = &d->ifm, *f2 = &d->ifm2;
    if (!within(d->mode, MUL, SHL) || !fm_fits(f1, ofm->depth, sizes[0]) ||
        !fm_fits(ofm, ofm->depth, sizes[2]) || !finish_fits(&d->finish, sizes[3]) ||
        f1->height > ofm->height || f1->width > ofm->width ||
        !within(d->operand_mode, SCALE_16BIT, SCALE_OPB_32BIT) ||
        !rescale_fits(d->shift, d->right, d->finish.rounding) ||
        (d->operand_mode != SCALE_16BIT && !rescale_fits(d->op_shift, d->op_right, d->op_rounding)))
        return 0;
    if (!d->has_ifm2) return 1;
    return fm_fits(f2, f2->depth, sizes[1]) && (f2->height == 1 || f2->height >= ofm->height) &&
           (f2->width == 1 || f2->width >= ofm->width) &&
           (f2->depth == 1 || f2->depth >= ofm->depth);
}

int etk_elementwise(const void *desc, int64_t ifm_mem, int64_t ifm2_mem, int64_t ofm_mem,
                    int64_t lut_mem, const int64_t sizes[4]) {
    if (!elementwise_fits((const elementwise_desc *)desc, sizes)) return OUTSIDE;
    return elementwise((const elementwise_desc *)desc, (const uint8_t *)ifm_mem, (const uint8_t *)ifm2_mem, (uint8_t *)ofm_mem,
                       (const uint8_t *)lut_mem);
}

int64_t etk_elementwise_desc_words(void) {
    return (int64_t)(sizeof(elementwise_desc) / sizeof(int64_t));
}
