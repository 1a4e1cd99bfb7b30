/* NPU_OP_CONV and NPU_OP_DEPTHWISE from the IFM in memory to the OFM in memory, with the output
 * stage, in one call: the same integer arithmetic as the Python simulator's conv.py, which is
 * the reference. Python packs conv_desc when it plans the program (native/conv.py) and passes
 * the addresses of the IFM and OFM regions, the weights, bias and scales and the SHRAM (for the
 * LUT) as arguments. */
#include "native.h"

typedef struct { /* conv_words() packs it */
    fmap ifm, ofm;
    int64_t kh, kw, sy, sx, dy, dx, pad_top, pad_left, pad_bottom, pad_right, upscale;
    int64_t depthwise, narrow; /* narrow: IFM - zp and every sum fit int16 and int32 */
    int64_t weights8; /* a narrow convolution's weights are int8 (all of them fit): half the
                       * bytes to read, which an FC layer's run is bound by */
    int64_t weight_bytes, channels; /* the weights' bytes, each scale array's elements */
    finish_desc finish;
} conv_desc;

typedef struct {
    int64_t ifm_mem, ofm_mem, weights, bias, scale, shift, right, lut_mem;
} conv_ptrs;

enum { NO_UPSCALE = 0, NEAREST = 1, TRANSPOSE = 2 };

/* The upscaled, padded IFM minus its zero point, (hp, wp, c) in `out` (zeroed by the caller):
 * padding and the zeros TRANSPOSE puts between elements read as the zero point, so they are 0
 * here (kernel.Kernel.upscaled and padded). */
static void padded_ifm(const conv_desc *d, const uint8_t *mem, int64_t wp, int64_t h_in,
                       int64_t w_in, int64_t c, int32_t *out) {
    for (int64_t yy = 0; yy < h_in; yy++) {
        for (int64_t xx = 0; xx < w_in; xx++) {
            int64_t sy = yy, sx = xx;
            if (d->upscale == NEAREST) {
                sy = yy / 2; sx = xx / 2;
            } else if (d->upscale == TRANSPOSE) {
                if ((yy | xx) & 1) continue;
                sy = yy / 2; sx = xx / 2;
            }
            read_pixel(mem, &d->ifm, sy, sx, c, out + ((yy + d->pad_top) * wp + xx + d->pad_left) * c);
        }
    }
}

#define KP 16 /* int16 elements in an AVX2 vector */

/* acc[ch] = the dot product of col with weight row ch, for every output channel; four rows
 * at a time, so each column element is loaded once for four. Made for int16 weights
 * (dots_narrow) and int8 ones (dots_narrow8: conv_desc.weights8). */
#define DOTS_NARROW(name, weight_t)                                                            \
    HOT static void name(const int16_t *col, const weight_t *w, int64_t k, int64_t oc,        \
                         int64_t *acc) {                                                       \
        int64_t ch = 0;                                                                        \
        for (; ch + 4 <= oc; ch += 4) {                                                        \
            const weight_t *w0 = w + ch * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;         \
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                            \
            for (int64_t i = 0; i < k; i++) {                                                  \
                int32_t a = col[i];                                                            \
                s0 += a * w0[i];                                                               \
                s1 += a * w1[i];                                                               \
                s2 += a * w2[i];                                                               \
                s3 += a * w3[i];                                                               \
            }                                                                                  \
            acc[ch] = s0, acc[ch + 1] = s1, acc[ch + 2] = s2, acc[ch + 3] = s3;                \
        }                                                                                      \
        for (; ch < oc; ch++) {                                                                \
            const weight_t *wr = w + ch * k;                                                   \
            int32_t s0 = 0;                                                                    \
            for (int64_t i = 0; i < k; i++) s0 += (int32_t)col[i] * wr[i];                     \
            acc[ch] = s0;                                                                      \
        }                                                                                      \
    }
DOTS_NARROW(dots_narrow, int16_t)
DOTS_NARROW(dots_narrow8, int8_t)

HOT static void dots_wide(const int32_t *col, const int16_t *w, int64_t k, int64_t oc,
                          int64_t *acc) {
    for (int64_t ch = 0; ch < oc; ch++) {
        const int16_t *wr = w + ch * k;
        int64_t s0 = 0;
        for (int64_t i = 0; i < k; i++) s0 += (int64_t)col[i] * wr[i];
        acc[ch] = s0;
    }
}

/* acc[ch] = the sum over the kernel's taps of the IFM's channel ch times its weight */
HOT static void depthwise_narrow(const int16_t *in, const int16_t *w, const conv_desc *d,
                                 int64_t row_stride, int64_t c, int64_t oc, int32_t *acc32,
                                 int64_t *acc) {
    memset(acc32, 0, (size_t)oc * sizeof(int32_t));
    for (int64_t i = 0; i < d->kh; i++) {
        for (int64_t j = 0; j < d->kw; j++) {
            const int16_t *a = in + i * d->dy * row_stride + j * d->dx * c;
            const int16_t *b = w + (i * d->kw + j) * oc;
            for (int64_t ch = 0; ch < oc; ch++) acc32[ch] += (int32_t)a[ch] * b[ch];
        }
    }
    for (int64_t ch = 0; ch < oc; ch++) acc[ch] = acc32[ch];
}

HOT static void depthwise_wide(const int32_t *in, const int16_t *w, const conv_desc *d,
                               int64_t row_stride, int64_t c, int64_t oc, int64_t *acc) {
    memset(acc, 0, (size_t)oc * sizeof(int64_t));
    for (int64_t i = 0; i < d->kh; i++) {
        for (int64_t j = 0; j < d->kw; j++) {
            const int32_t *a = in + i * d->dy * row_stride + j * d->dx * c;
            const int16_t *b = w + (i * d->kw + j) * oc;
            for (int64_t ch = 0; ch < oc; ch++) acc[ch] += (int64_t)a[ch] * b[ch];
        }
    }
}

/* Whether every channel's output stage is the common one: an 8-bit NHWC OFM without a LUT,
 * scales and shifts that rescale_saturated takes its 64-bit way for any value below 2^31 */
static int plain_outputs(const conv_desc *d, const conv_ptrs *p) {
    const fmap *f = &d->ofm;
    if (f->brick || f->elem_size != 1 || d->finish.lut_offset >= 0 ||
        d->finish.rounding == TRUNCATE)
        return 0;
    const int64_t *scale = (const int64_t *)p->scale, *shift = (const int64_t *)p->shift;
    const int64_t *right = (const int64_t *)p->right;
    for (int64_t ch = 0; ch < f->depth; ch++)
        if (scale[ch] <= -LIMIT31 || scale[ch] >= LIMIT31 || shift[ch] < 0 || shift[ch] >= 63 ||
            right[ch] < 0 || right[ch] >= 63)
            return 0;
    return 1;
}

static void write_pixel(const conv_desc *d, const conv_ptrs *p, int64_t y, int64_t x,
                        const int64_t *acc, int plain) {
    const fmap *f = &d->ofm;
    uint8_t *mem = (uint8_t *)p->ofm_mem;
    const int64_t *bias = (const int64_t *)p->bias, *scale = (const int64_t *)p->scale;
    const int64_t *shift = (const int64_t *)p->shift, *right = (const int64_t *)p->right;
    uint8_t *pixel = mem + fm_offset(f, y, x, 0);
    if (plain) { /* rescale_saturated's 64-bit way and finish_value without a LUT, inline */
        int64_t zp = d->finish.zero_point, lo = d->finish.lo, hi = d->finish.hi;
        for (int64_t ch = 0; ch < f->depth; ch++) {
            int64_t a = acc[ch] + bias[ch];
            int64_t v = a > -LIMIT31 && a < LIMIT31
                            ? rescale64(a, scale[ch], shift[ch], right[ch])
                            : rescale_saturated(a, scale[ch], shift[ch], right[ch],
                                                d->finish.rounding);
            v += zp;
            pixel[ch] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
        }
        return;
    }
    int64_t e = f->elem_size;
    for (int64_t ch = 0; ch < f->depth; ch++) {
        int64_t at = f->brick ? (ch / 16) * f->stride_c + (ch % 16) * e : ch * e;
        int64_t v = rescale_saturated(acc[ch] + bias[ch], scale[ch], shift[ch], right[ch],
                                      d->finish.rounding);
        store(pixel + at, e, finish_value(&d->finish, v, (const uint8_t *)p->lut_mem));
    }
}

/* One convolution or depthwise convolution. Returns 0, or -1 when out of memory (the caller
 * raises MemoryError). weights: (OC, KH * KW * C) int16 (int8 with weights8) for a
 * convolution, (KH, KW, OC) int16 for depthwise, C the IFM depth. */
static int conv(const conv_desc *d, const conv_ptrs *p) {
    const fmap *ofm = &d->ofm;
    int64_t oh = ofm->height, ow = ofm->width, oc = ofm->depth, c = d->ifm.depth;
    int64_t hp = (oh - 1) * d->sy + (d->kh - 1) * d->dy + 1;
    int64_t wp = (ow - 1) * d->sx + (d->kw - 1) * d->dx + 1;
    int64_t h_in = hp - d->pad_top - d->pad_bottom, w_in = wp - d->pad_left - d->pad_right;
    int64_t taps = d->kh * d->kw, k = d->depthwise ? taps : taps * c;
    size_t n = (size_t)(hp * wp * c);
    int32_t *padded = calloc(n ? n : 1, sizeof(int32_t));
    int16_t *narrow = d->narrow ? malloc((n ? n : 1) * sizeof(int16_t)) : NULL;
    int64_t *acc = malloc((size_t)(oc ? oc : 1) * sizeof(int64_t));
    int32_t *acc32 = malloc((size_t)(oc ? oc : 1) * sizeof(int32_t));
    /* a narrow convolution's columns and weight rows zero-padded to whole vectors (KP): the
     * dots' loop over k then has no scalar tail, which a short column (3x3x3) spent most in */
    int64_t kp = d->narrow && !d->depthwise ? (k + KP - 1) / KP * KP : k;
    void *col = calloc((size_t)(kp ? kp : 1), sizeof(int32_t));
    void *wpad = kp != k ? calloc((size_t)(kp * oc), d->weights8 ? 1 : 2) : NULL;
    int status = 0;
    if (!padded || (d->narrow && !narrow) || !acc || !acc32 || !col || (kp != k && !wpad)) {
        status = -1;
        goto done;
    }
    padded_ifm(d, (const uint8_t *)p->ifm_mem, wp, h_in, w_in, c, padded);
    if (narrow)
        for (size_t i = 0; i < n; i++) narrow[i] = (int16_t)padded[i];
    const void *weights = (const void *)(intptr_t)p->weights;
    if (wpad != NULL) {
        size_t e = d->weights8 ? 1 : 2;
        for (int64_t ch = 0; ch < oc; ch++)
            memcpy((char *)wpad + ch * kp * e, (const char *)weights + ch * k * e, (size_t)k * e);
        weights = wpad;
    }
    const int16_t *w = (const int16_t *)p->weights;
    int plain = plain_outputs(d, p);
    for (int64_t y = 0; y < oh; y++) {
        for (int64_t x = 0; x < ow; x++) {
            int64_t at = (y * d->sy * wp + x * d->sx) * c;
            if (d->depthwise) {
                if (narrow) depthwise_narrow(narrow + at, w, d, wp * c, c, oc, acc32, acc);
                else depthwise_wide(padded + at, w, d, wp * c, c, oc, acc);
            } else {
                /* the column of taps this output meets, tap by tap, channels within: a
                 * kernel row's taps are one run where they are next to each other (dx 1) */
                int64_t run = d->dx == 1 ? d->kw * c : c, runs = d->dx == 1 ? 1 : d->kw;
                for (int64_t i = 0; i < d->kh; i++) {
                    for (int64_t j = 0; j < runs; j++) {
                        int64_t from = at + (i * d->dy * wp + j * d->dx) * c;
                        int64_t to = (i * d->kw + j) * c;
                        if (narrow) memcpy((int16_t *)col + to, narrow + from, (size_t)run * 2);
                        else memcpy((int32_t *)col + to, padded + from, (size_t)run * 4);
                    }
                }
                if (narrow && d->weights8)
                    dots_narrow8((const int16_t *)col, (const int8_t *)weights, kp, oc, acc);
                else if (narrow) dots_narrow((const int16_t *)col, (const int16_t *)weights, kp, oc, acc);
                else dots_wide((const int32_t *)col, w, k, oc, acc);
            }
            write_pixel(d, p, y, x, acc, plain);
        }
    }
done:
    free(padded);
    free(narrow);
    free(acc);
    free(acc32);
    free(col);
    free(wpad);
    return status;
}

/* Whether the description stays inside the IFM's, OFM's and LUT's memories (native.h) and
 * reads no more weights and scales than the arrays it was given hold (native/conv.py sets their
 * sizes with them). */
static int conv_fits(const conv_desc *d, const int64_t sizes[4]) {
    const fmap *ofm = &d->ofm;
    if (!geometry_fits(&d->kh) || !within(d->upscale, NO_UPSCALE, TRANSPOSE) ||
        !fm_fits(&d->ifm, d->ifm.depth, sizes[0]) || !fm_fits(ofm, ofm->depth, sizes[2]) ||
        !finish_fits(&d->finish, sizes[3]) || (d->depthwise && ofm->depth > d->ifm.depth))
        return 0;
    if (ofm->height == 0 || ofm->width == 0 || ofm->depth == 0) return 1;
    int64_t hp = (ofm->height - 1) * d->sy + (d->kh - 1) * d->dy + 1;
    int64_t wp = (ofm->width - 1) * d->sx + (d->kw - 1) * d->dx + 1;
    int64_t taps = d->kh * d->kw;
    int64_t weights = d->depthwise ? taps * ofm->depth : taps * d->ifm.depth * ofm->depth;
    if (d->weight_bytes < weights * (d->weights8 && d->narrow && !d->depthwise ? 1 : 2) ||
        d->channels < ofm->depth)
        return 0;
    return hp <= DIM_MAX * 4 && wp <= DIM_MAX * 4 && hp * wp * d->ifm.depth <= ELEMENTS_MAX &&
           taps * d->ifm.depth <= ELEMENTS_MAX &&
           extent_fits(hp - d->pad_top - d->pad_bottom, d->upscale != NO_UPSCALE, d->ifm.height) &&
           extent_fits(wp - d->pad_left - d->pad_right, d->upscale != NO_UPSCALE, d->ifm.width);
}

/* ptrs as arguments, not a shared array: runs of one plan in two threads stay apart.
 * sizes: the bytes of the IFM's, IFM2's (unused), OFM's and LUT's memories. */
int etk_conv(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t weights, int64_t bias,
             int64_t scale, int64_t shift, int64_t right, int64_t lut_mem, const int64_t sizes[4]) {
    if (!conv_fits((const conv_desc *)desc, sizes)) return OUTSIDE;
    conv_ptrs p = {ifm_mem, ofm_mem, weights, bias, scale, shift, right, lut_mem};
    return conv((const conv_desc *)desc, &p);
}

/* How many int64 words each structure holds: the Python packer checks its layout against them. */
int64_t etk_conv_desc_words(void) { return (int64_t)(sizeof(conv_desc) / sizeof(int64_t)); }
