/* NPU_OP_ELEMENTWISE from the IFM and IFM2 in memory to the OFM in memory, with the output
 * stage, in one call: the same integer arithmetic as elementwise.py and alu.py, which are the
 * reference. Python packs elementwise_desc when it plans the program (native/elementwise.py). */
#include "native.h"

enum { MUL, ADD, SUB, MIN, MAX, LRELU, ABS, CLZ, SHR, SHL }; /* elementwise.MODES */
enum { SCALE_16BIT = 0, SCALE_OPA_32BIT = 1, SCALE_OPB_32BIT = 2 };
#define INPUT_SHIFT_8BIT 20

typedef struct { /* elementwise_words() packs it */
    fmap ifm, ifm2, ofm; /* ifm2 is read only when has_ifm2 (else `scalar`, or nothing) */
    int64_t mode, has_ifm2, scalar, reversed;
    /* elementwise.OperandScales: 16-bit multipliers (1 and 1 but for ADD/SUB), or which
     * operand the 32-bit operand scale (a Rescale) takes */
    int64_t operand_mode, opa, opb, op_scale, op_shift, op_right, op_rounding;
    /* the OFM's Rescale; negative_only: LRELU's (alu.NegativeRescale) */
    int64_t scale, shift, right, negative_only;
    finish_desc finish;
} elementwise_desc;

/* OperandScales.functions: operand `b` (0: A, 1: B), zero point already subtracted */
static inline int64_t scale_operand(const elementwise_desc *d, int64_t x, int b) {
    if (d->operand_mode == SCALE_16BIT) return x * (b ? d->opb : d->opa);
    if ((d->operand_mode == SCALE_OPB_32BIT) == b) /* Python checked the result fits int64 */
        return rescale_value(x * ((int64_t)1 << INPUT_SHIFT_8BIT), d->op_scale, d->op_shift,
                             d->op_right, d->op_rounding);
    return x * ((int64_t)1 << (INPUT_SHIFT_8BIT - 1));
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

/* One elementwise operation (elementwise.prepare_elementwise's run). Returns 0, or -1 when
 * out of memory. Both operands are read before the OFM is written, as numpy does. */
static int elementwise(const elementwise_desc *d, const uint8_t *ifm_mem,
                       const uint8_t *ifm2_mem, uint8_t *ofm_mem, const uint8_t *lut_mem) {
    const fmap *ofm = &d->ofm, *f2 = &d->ifm2;
    int64_t h = ofm->height, w = ofm->width, c = ofm->depth;
    size_t n = (size_t)(h * w * c), n2 = d->has_ifm2 ? (size_t)(f2->height * f2->width * f2->depth) : 1;
    int64_t *a = malloc((n ? n : 1) * sizeof(int64_t)), *b = malloc((n2 ? n2 : 1) * sizeof(int64_t));
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    read_map(ifm_mem, &d->ifm, c, a);
    if (d->has_ifm2) read_map(ifm2_mem, f2, f2->depth, b);
    else b[0] = d->scalar;
    /* IFM2's steps in b: 0 along a broadcast axis (or for a scalar) */
    int64_t sy = d->has_ifm2 && f2->height > 1 ? f2->width * f2->depth : 0;
    int64_t sx = d->has_ifm2 && f2->width > 1 ? f2->depth : 0;
    int64_t sc = d->has_ifm2 && f2->depth > 1 ? 1 : 0;
    int64_t *v = a;
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            const int64_t *b_pixel = b + y * sy + x * sx;
            for (int64_t ch = 0; ch < c; ch++, v++) {
                int64_t first = *v, second = b_pixel[ch * sc];
                if (d->reversed) {
                    int64_t t = first;
                    first = second;
                    second = t;
                }
                int64_t acc = combine(d->mode, scale_operand(d, first, 0), scale_operand(d, second, 1));
                if (!d->negative_only || acc < 0)
                    acc = rescale_saturated(acc, d->scale, d->shift, d->right, d->finish.rounding);
                *v = acc;
            }
        }
    }
    write_map(ofm_mem, ofm, &d->finish, a, lut_mem);
    free(a);
    free(b);
    return 0;
}

int etk_elementwise(const elementwise_desc *d, int64_t ifm_mem, int64_t ifm2_mem, int64_t ofm_mem,
                    int64_t lut_mem) {
    return elementwise(d, (const uint8_t *)ifm_mem, (const uint8_t *)ifm2_mem, (uint8_t *)ofm_mem,
                       (const uint8_t *)lut_mem);
}

int64_t etk_elementwise_desc_words(void) {
    return (int64_t)(sizeof(elementwise_desc) / sizeof(int64_t));
}
