/* NPU_OP_POOL from the IFM in memory to the OFM in memory, with the output stage, in one call:
 * the same integer arithmetic as pool.py, which is the reference. Python packs pool_desc when
 * it plans the program (native/pool.py). */
#include "native.h"

enum { MAX_POOL = 0, AVERAGE = 1, REDUCE_SUM = 2 }; /* pool.MODES */
enum { NO_UPSCALE = 0, NEAREST = 1 };               /* kernel.py's IFM_UPSCALE modes */
#define EMPTY (INT64_MIN / 4) /* pool._EMPTY: below any IFM value, padding never wins a max */

typedef struct { /* native/pool.py's pool_kernel packs it */
    fmap ifm, ofm;
    int64_t kh, kw, sy, sx, dy, dx, pad_top, pad_left, pad_bottom, pad_right, upscale;
    int64_t mode, depth; /* depth: the IFM channels read (the OFM's, or the IFM's for a sum) */
    int64_t divide;      /* each sum over its count of taps inside the IFM: pool.divide_by_count */
    int64_t scaled, scale, shift, right; /* the OFM's Rescale, when the global scale is on */
    finish_desc finish;
} pool_desc;

/* acc[ch] = the max or the sum over the window at (oy, ox) of x (the IFM minus its zero point,
 * (ifm height, ifm width, c)): pool.py's taps of the upscaled, padded IFM. Padding adds
 * nothing to a sum and reads as EMPTY - zero point in a max, where acc starts. Returns the
 * number of taps inside the IFM. */
HOT static int64_t window(const pool_desc *d, const int64_t *x, int64_t oy, int64_t ox, int64_t h_in,
                       int64_t w_in, int64_t c, int64_t *acc) {
    int64_t start = d->mode == MAX_POOL ? EMPTY - d->ifm.zero_point : 0;
    for (int64_t ch = 0; ch < c; ch++) acc[ch] = start;
    int64_t taps = 0;
    for (int64_t i = 0; i < d->kh; i++) {
        int64_t py = oy * d->sy + i * d->dy - d->pad_top;
        if (py < 0 || py >= h_in) continue;
        if (d->upscale == NEAREST) py /= 2;
        for (int64_t j = 0; j < d->kw; j++) {
            int64_t px = ox * d->sx + j * d->dx - d->pad_left;
            if (px < 0 || px >= w_in) continue;
            if (d->upscale == NEAREST) px /= 2;
            const int64_t *p = x + (py * d->ifm.width + px) * c;
            taps++;
            if (d->mode == MAX_POOL)
                for (int64_t ch = 0; ch < c; ch++) acc[ch] = p[ch] > acc[ch] ? p[ch] : acc[ch];
            else
                for (int64_t ch = 0; ch < c; ch++) acc[ch] += p[ch];
        }
    }
    return taps;
}

/* acc[0..c) / count, rounded as pool.divide_by_count (TOSA's reciprocal_scale, apply_scale_32);
 * 128-bit products: a 32-bit IFM's sums times the multiplier pass 2^63 */
static void divide_by_count(int64_t *acc, int64_t c, int64_t count) {
    if (count < 1) count = 1;
    int64_t k = 0;
    while (((int64_t)1 << k) < count) k++;
    int64_t multiplier = ((((int64_t)1 << 30) + 1) << k) / count, shift = 30 + k;
    for (int64_t ch = 0; ch < c; ch++)
        acc[ch] = (int64_t)(((__int128)acc[ch] * multiplier + ((__int128)1 << (shift - 1))) >> shift);
}

/* One pooling operation (pool.prepare_pool's run). Returns 0, or -1 when out of memory. The
 * IFM is read before the OFM is written, as numpy does. */
static int pool(const pool_desc *d, const uint8_t *ifm_mem, uint8_t *ofm_mem,
                const uint8_t *lut_mem) {
    const fmap *ofm = &d->ofm;
    int64_t oh = ofm->height, ow = ofm->width, c = d->depth;
    /* the (upscaled) IFM extent the kernel covers, padding excluded: Kernel.kernel_extent */
    int64_t h_in = (oh - 1) * d->sy + (d->kh - 1) * d->dy + 1 - d->pad_top - d->pad_bottom;
    int64_t w_in = (ow - 1) * d->sx + (d->kw - 1) * d->dx + 1 - d->pad_left - d->pad_right;
    size_t n_in = (size_t)(d->ifm.height * d->ifm.width * c);
    size_t n_out = (size_t)(oh * ow * ofm->depth);
    int64_t *x = malloc((n_in ? n_in : 1) * sizeof(int64_t));
    int64_t *acc = malloc((size_t)(c ? c : 1) * sizeof(int64_t));
    int64_t *out = malloc((n_out ? n_out : 1) * sizeof(int64_t));
    if (!x || !acc || !out) {
        free(x);
        free(acc);
        free(out);
        return -1;
    }
    /* a 1x1 window at stride 1 without padding (Vela's transposes and rescales): each output
     * is its IFM value, read straight into the outputs */
    int one_by_one = d->kh == 1 && d->kw == 1 && d->sy == 1 && d->sx == 1 && d->pad_top == 0 &&
                     d->pad_left == 0 && d->pad_bottom == 0 && d->pad_right == 0 &&
                     d->upscale == NO_UPSCALE && d->mode != REDUCE_SUM &&
                     d->ifm.height == oh && d->ifm.width == ow && c == ofm->depth;
    if (one_by_one) {
        read_map(ifm_mem, &d->ifm, c, out);
        goto rescale;
    }
    read_map(ifm_mem, &d->ifm, c, x);
    int64_t *o = out;
    for (int64_t oy = 0; oy < oh; oy++) {
        for (int64_t ox = 0; ox < ow; ox++) {
            int64_t taps = window(d, x, oy, ox, h_in, w_in, c, acc);
            if (d->divide) divide_by_count(acc, c, taps);
            int64_t count = c;
            if (d->mode == REDUCE_SUM) { /* over the channels too: one OFM channel */
                int64_t total = 0;
                for (int64_t ch = 0; ch < c; ch++) total += acc[ch];
                acc[0] = total;
                count = 1;
            }
            memcpy(o, acc, (size_t)count * sizeof(int64_t));
            o += count;
        }
    }
rescale:
    if (d->scaled) rescale_values(out, n_out, d->scale, d->shift, d->right, d->finish.rounding, 0);
    write_map(ofm_mem, ofm, &d->finish, out, lut_mem);
    free(x);
    free(acc);
    free(out);
    return 0;
}

/* Whether the description stays inside the IFM's, OFM's and LUT's memories (native.h). */
static int pool_fits(const pool_desc *d, const int64_t sizes[4]) {
    const fmap *ofm = &d->ofm;
    int64_t per_pixel = d->mode == REDUCE_SUM ? 1 : d->depth; /* the outputs each pixel makes */
    if (!geometry_fits(&d->kh) || !within(d->upscale, NO_UPSCALE, NEAREST) ||
        !within(d->mode, MAX_POOL, REDUCE_SUM) || !within(d->divide, 0, d->mode == AVERAGE) ||
        (d->divide && d->kh * d->kw > ((int64_t)1 << 16)) || /* divide_by_count's shift */
        !fm_fits(&d->ifm, d->depth, sizes[0]) ||
        !fm_fits(ofm, ofm->depth, sizes[2]) || !finish_fits(&d->finish, sizes[3]) ||
        per_pixel > ofm->depth || (d->scaled && !rescale_fits(d->shift, d->right, d->finish.rounding)))
        return 0;
    if (ofm->height == 0 || ofm->width == 0) return 1;
    int64_t h_in = (ofm->height - 1) * d->sy + (d->kh - 1) * d->dy + 1 - d->pad_top - d->pad_bottom;
    int64_t w_in = (ofm->width - 1) * d->sx + (d->kw - 1) * d->dx + 1 - d->pad_left - d->pad_right;
    return extent_fits(h_in, d->upscale == NEAREST, d->ifm.height) &&
           extent_fits(w_in, d->upscale == NEAREST, d->ifm.width);
}

int etk_pool(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t lut_mem,
             const int64_t sizes[4]) {
    const pool_desc *d = (const pool_desc *)desc;
    if (!pool_fits(d, sizes)) return OUTSIDE;
    return pool(d, (const uint8_t *)ifm_mem, (uint8_t *)ofm_mem, (const uint8_t *)lut_mem);
}

int64_t etk_pool_desc_words(void) { return (int64_t)(sizeof(pool_desc) / sizeof(int64_t)); }
