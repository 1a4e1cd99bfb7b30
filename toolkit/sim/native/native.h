/* What the simulator's native kernels share: feature maps in memory (layouts.py) and the output
 * stage (outstage.py, activation.py), exactly as the Python simulator does them. Every
 * structure is an array of int64 that Python packs (toolkit/sim/native/__init__.py). */
#ifndef ETK_NATIVE_H
#define ETK_NATIVE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
/* the hot loops in an AVX2 build too, picked at load time on a CPU that has it */
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

typedef struct { /* layouts.FeatureMap, as fm_words() packs it */
    int64_t region, base[4], height0, height1, width0, height, width, depth;
    int64_t stride_y, stride_x, stride_c, elem_size, is_signed, brick, zero_point;
} fmap;

typedef struct { /* the output stage after the scale: finish_words() packs it */
    int64_t rounding, zero_point, lo, hi;
    int64_t lut_offset, lut_elem_size, lut_signed, lut_index_base; /* lut_offset < 0: none */
} finish_desc;

enum { TFL = 0, TRUNCATE = 1, NATURAL = 2 }; /* rounding modes (outstage.py) */
#define LIMIT31 ((int64_t)1 << 31)

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Byte offset of element (y, x, c) in its region: tile by (y, x), then NHWC or NHCWB16
 * (layouts._tiles and _pieces). */
static inline int64_t fm_offset(const fmap *f, int64_t y, int64_t x, int64_t c) {
    int64_t w0 = min64(f->width0, f->width);
    int t, ty = y, tx = x;
    if (x < w0) {
        int64_t h0 = min64(f->height0, f->height);
        t = y < h0 ? 0 : 2;
        if (t == 2) ty = y - h0;
    } else {
        int64_t h1 = min64(f->height1, f->height);
        t = y < h1 ? 1 : 3;
        if (t == 3) ty = y - h1;
        tx = x - w0;
    }
    int64_t e = f->elem_size, off = f->base[t] + ty * f->stride_y;
    if (f->brick) return off + tx * 16 * e + (c / 16) * f->stride_c + (c % 16) * e;
    return off + tx * f->stride_x + c * e;
}

static inline int64_t load(const uint8_t *p, int64_t size, int64_t is_signed) {
    switch (size) {
    case 1: return is_signed ? (int64_t)*(const int8_t *)p : (int64_t)*p;
    case 2: {
        uint16_t v; memcpy(&v, p, 2);
        return is_signed ? (int64_t)(int16_t)v : (int64_t)v;
    }
    default: {
        uint32_t v; memcpy(&v, p, 4);
        return is_signed ? (int64_t)(int32_t)v : (int64_t)v;
    }
    }
}

static inline void store(uint8_t *p, int64_t size, int64_t v) {
    switch (size) {
    case 1: *p = (uint8_t)v; break;
    case 2: { uint16_t u = (uint16_t)v; memcpy(p, &u, 2); break; }
    default: { uint32_t u = (uint32_t)v; memcpy(p, &u, 4); break; }
    }
}

/* Channels [0, n) of pixel (y, x) minus the zero point, as int32. */
static inline void read_pixel(const uint8_t *mem, const fmap *f, int64_t y, int64_t x, int64_t n,
                              int32_t *out) {
    int64_t e = f->elem_size;
    int32_t zp = (int32_t)f->zero_point;
    const uint8_t *pixel = mem + fm_offset(f, y, x, 0);
    /* NHWC: the channels are one run; NHCWB16: a run of (up to) 16 per brick */
    int64_t run = f->brick ? 16 : n, step = f->brick ? f->stride_c : 0;
    for (int64_t c0 = 0; c0 < n; c0 += run) {
        const uint8_t *p = pixel + (c0 / run) * step;
        int32_t *o = out + c0;
        int64_t m = n - c0 < run ? n - c0 : run;
        if (e == 1 && f->is_signed)
            for (int64_t c = 0; c < m; c++) o[c] = (int32_t)((const int8_t *)p)[c] - zp;
        else if (e == 1)
            for (int64_t c = 0; c < m; c++) o[c] = (int32_t)p[c] - zp;
        else
            for (int64_t c = 0; c < m; c++) o[c] = (int32_t)(load(p + c * e, e, f->is_signed) - zp);
    }
}

/* outstage.Rescale.apply of one value in 128 bits: exact for any int64 acc and scale (numpy
 * goes to Python ints where int64 could overflow) */
static inline __int128 rescale_wide(int64_t acc, int64_t m, int64_t s, int64_t r, int64_t rounding) {
    __int128 v = (__int128)acc * m, out;
    if (rounding == TRUNCATE) {
        __int128 mag = (v < 0 ? -v : v) >> s;
        out = v < 0 ? -mag : mag;
    } else {
        __int128 half = s > 0 ? (__int128)1 << (s - 1) : 0;
        out = (v + half) >> s;
        if (r > 0) { /* TFL: a second rounding divide, ties away from zero */
            __int128 rhalf = (__int128)1 << (r - 1);
            out = (out + rhalf - (out < 0 ? 1 : 0)) >> r;
        }
    }
    return out;
}

/* outstage.Rescale.apply of one value (shift and right as Rescale splits them) for any int64
 * acc and scale, exact, or +-2^62 where the exact value lies
 * beyond: finish_value then adds the zero point without overflow and clips it to the OFM
 * value that outstage.Finish gives (numpy rescales in Python ints where int64 could overflow) */
#define SATURATED ((int64_t)1 << 62)

/* rescale_wide in 64 bits, TFL's second rounding too: exact where |acc * m| < 2^62 and
 * 0 <= s < 63 (half <= 2^61), rounding not TRUNCATE */
static inline int64_t rescale64(int64_t acc, int64_t m, int64_t s, int64_t r) {
    int64_t half = s > 0 ? (int64_t)1 << (s - 1) : 0, out = (acc * m + half) >> s;
    if (r > 0) out = (out + ((int64_t)1 << (r - 1)) - (out < 0 ? 1 : 0)) >> r;
    return out;
}
static inline int64_t rescale_saturated(int64_t acc, int64_t m, int64_t s, int64_t r,
                                        int64_t rounding) {
    if (acc > -LIMIT31 && acc < LIMIT31 && m > -LIMIT31 && m < LIMIT31 && s < 63 &&
        rounding != TRUNCATE)
        return rescale64(acc, m, s, r);
    __int128 v = m == 1 && s == 0 && r == 0 ? (__int128)acc : rescale_wide(acc, m, s, r, rounding);
    if (v > SATURATED) return SATURATED;
    if (v < -SATURATED) return -SATURATED;
    return (int64_t)v;
}

/* rescale_saturated of n values in place; negative_only (LRELU's alu.NegativeRescale) leaves
 * the others as they are. Where every product fits 62 bits, one rounding per loop, no branch
 * per value (rescale_wide's arithmetic, which cannot overflow int64 there). */
static inline void rescale_values(int64_t *v, size_t n, int64_t m, int64_t s, int64_t r,
                                  int64_t rounding, int64_t negative_only) {
    int64_t lowest = 0, highest = 0;
    for (size_t i = 0; i < n; i++) {
        lowest = v[i] < lowest ? v[i] : lowest;
        highest = v[i] > highest ? v[i] : highest;
    }
    /* every |v * m| below 2^62 (half <= 2^61): the 64-bit way is exact, whatever the scale
     * (a pool's identity rescale has m = 2^31 + 1) */
    int64_t bound = -lowest > highest ? -lowest : highest, magnitude = m < 0 ? -m : m;
    if (lowest < -SATURATED || highest > SATURATED || magnitude >= SATURATED ||
        (magnitude > 0 && bound > (SATURATED - 1) / magnitude) || s >= 63 ||
        rounding == TRUNCATE || negative_only) {
        for (size_t i = 0; i < n; i++)
            if (!negative_only || v[i] < 0) v[i] = rescale_saturated(v[i], m, s, r, rounding);
        return;
    }
    if (m == 1 && s == 0 && r == 0) return;
    int64_t half = s > 0 ? (int64_t)1 << (s - 1) : 0;
    if (r == 0) {
        for (size_t i = 0; i < n; i++) v[i] = (v[i] * m + half) >> s;
        return;
    }
    int64_t right_half = (int64_t)1 << (r - 1);
    for (size_t i = 0; i < n; i++) {
        int64_t out = (v[i] * m + half) >> s;
        v[i] = (out + right_half - (out < 0 ? 1 : 0)) >> r; /* TFL: ties away from zero */
    }
}

/* Byte offset of channel c within its pixel, NHWC or NHCWB16 (fm_offset's last terms) */
static inline int64_t channel_offset(const fmap *f, int64_t c) {
    int64_t e = f->elem_size;
    return f->brick ? (c / 16) * f->stride_c + (c % 16) * e : c * e;
}

/* n values of one element size at p (contiguous) minus the zero point, as int64 */
static inline void load_run(const uint8_t *p, const fmap *f, int64_t n, int64_t *out) {
    int64_t e = f->elem_size, zp = f->zero_point;
    if (e == 1 && f->is_signed)
        for (int64_t c = 0; c < n; c++) out[c] = (int64_t)((const int8_t *)p)[c] - zp;
    else if (e == 1)
        for (int64_t c = 0; c < n; c++) out[c] = (int64_t)p[c] - zp;
    else
        for (int64_t c = 0; c < n; c++) out[c] = load(p + c * e, e, f->is_signed) - zp;
}

/* The channels of a pixel lie in runs of contiguous elements: all of them (NHWC) or 16 at a
 * time (NHCWB16) */
static inline int64_t channel_run(const fmap *f, int64_t depth) { return f->brick ? 16 : depth; }

/* The first `depth` channels of every pixel minus the zero point, as int64, (H, W, depth) in
 * `out`: layouts.FeatureMap.read (32-bit values minus a zero point need more than int32). */
static inline void read_map(const uint8_t *mem, const fmap *f, int64_t depth, int64_t *out) {
    int64_t run = channel_run(f, depth);
    for (int64_t y = 0; y < f->height; y++) {
        for (int64_t x = 0; x < f->width; x++, out += depth) {
            const uint8_t *p = mem + fm_offset(f, y, x, 0);
            for (int64_t c = 0; c < depth; c += run)
                load_run(p + channel_offset(f, c), f, min64(run, depth - c), out + c);
        }
    }
}

/* outstage.Finish of one rescaled value: zero point, clip, LUT (in lut_mem, the SHRAM) */
static inline int64_t finish_value(const finish_desc *f, int64_t value, const uint8_t *lut_mem) {
    value += f->zero_point;
    if (value < f->lo) value = f->lo;
    if (value > f->hi) value = f->hi;
    if (f->lut_offset >= 0)
        value = load(lut_mem + f->lut_offset + (value - f->lut_index_base) * f->lut_elem_size,
                     f->lut_elem_size, f->lut_signed);
    return value;
}

/* The output stage's last steps and the OFM write of (H, W, C) rescaled values:
 * outstage.Finish, then layouts.FeatureMap.write */
static inline void write_map(uint8_t *mem, const fmap *f, const finish_desc *finish,
                             const int64_t *values, const uint8_t *lut_mem) {
    int64_t e = f->elem_size, run = channel_run(f, f->depth);
    for (int64_t y = 0; y < f->height; y++) {
        for (int64_t x = 0; x < f->width; x++, values += f->depth) {
            uint8_t *p = mem + fm_offset(f, y, x, 0);
            for (int64_t c = 0; c < f->depth; c += run) {
                uint8_t *q = p + channel_offset(f, c);
                int64_t n = min64(run, f->depth - c);
                if (e == 1)
                    for (int64_t i = 0; i < n; i++)
                        q[i] = (uint8_t)finish_value(finish, values[c + i], lut_mem);
                else
                    for (int64_t i = 0; i < n; i++)
                        store(q + i * e, e, finish_value(finish, values[c + i], lut_mem));
            }
        }
    }
}

/* The trust boundary of the native layer: each kernel's entry checks its description against
 * the sizes of the memories it is given before it touches them (whatever made the description),
 * so that no description reads or writes outside its buffers. */
#define OUTSIDE 3            /* a kernel's status: its description reaches outside its memory */
#define DIM_MAX ((int64_t)1 << 17)      /* any height, width, depth or kernel size */
#define ELEMENTS_MAX ((int64_t)1 << 27) /* any buffer a kernel allocates, in elements */

static inline int within(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }
static inline __int128 min128(__int128 a, __int128 b) { return a < b ? a : b; }
static inline __int128 max128(__int128 a, __int128 b) { return a > b ? a : b; }

/* Whether bytes [base + lowest term sum, base + highest term sum + e) lie in [0, size) for
 * n[i] steps of stride[i] each (any sign). */
static inline int span_fits(__int128 base, const int64_t *n, const __int128 *stride, int dims,
                            int64_t e, int64_t size) {
    __int128 lo = base, hi = base + e;
    for (int i = 0; i < dims; i++) {
        if (n[i] <= 0) return 1; /* no element */
        __int128 far = (__int128)(n[i] - 1) * stride[i];
        lo += min128(0, far);
        hi += max128(0, far);
    }
    return lo >= 0 && hi <= size;
}

/* The lowest and highest of k * stride for k in [0, n) (n >= 1), into lo and hi. */
static inline void term_range(int64_t n, __int128 stride, __int128 *lo, __int128 *hi) {
    __int128 far = (__int128)(n - 1) * stride;
    *lo = min128(0, far);
    *hi = max128(0, far);
}

/* The lowest and highest byte offset of channel c < depth within a pixel (channel_offset). In
 * NHCWB16 the last brick holds (depth - 1) % 16 + 1 channels, the others 16: two boxes of
 * (brick, channel in it), each bounded at its corners. */
static inline void channel_range(const fmap *f, int64_t depth, __int128 *lo, __int128 *hi) {
    int64_t e = f->elem_size;
    if (!f->brick) {
        term_range(depth, e, lo, hi);
        return;
    }
    int64_t bricks = (depth - 1) / 16 + 1;
    __int128 b_lo, b_hi, r_lo, r_hi; /* the last brick */
    r_lo = 0;
    r_hi = (__int128)((depth - 1) % 16) * e;
    b_lo = b_hi = (__int128)(bricks - 1) * f->stride_c;
    *lo = b_lo + r_lo;
    *hi = b_hi + r_hi;
    if (bricks > 1) { /* the full bricks before it */
        term_range(bricks - 1, f->stride_c, &b_lo, &b_hi);
        *lo = min128(*lo, b_lo);
        *hi = max128(*hi, b_hi + (__int128)15 * e);
    }
}

/* Whether every element (y < height, x < width, c < depth) of f lies in its region's `size`
 * bytes (fm_offset's four tiles, NHWC or NHCWB16) and its shape is one a kernel can buffer. */
static inline int fm_fits(const fmap *f, int64_t depth, int64_t size) {
    int64_t e = f->elem_size;
    if ((e != 1 && e != 2 && e != 4) || !within(f->height, 0, DIM_MAX) ||
        !within(f->width, 0, DIM_MAX) || !within(depth, 0, DIM_MAX) ||
        f->height * f->width * depth > ELEMENTS_MAX || f->height0 < 0 || f->height1 < 0 ||
        f->width0 < 0 || !within(f->zero_point, -((int64_t)1 << 32), (int64_t)1 << 32))
        return 0;
    if (f->height == 0 || f->width == 0 || depth == 0) return 1;
    int64_t w0 = min64(f->width0, f->width), h0 = min64(f->height0, f->height);
    int64_t h1 = min64(f->height1, f->height);
    /* (rows, columns) of tiles 0-3 */
    int64_t rows[4] = {h0, h1, f->height - h0, f->height - h1};
    int64_t cols[4] = {w0, f->width - w0, w0, f->width - w0};
    __int128 x_step = f->brick ? (__int128)16 * e : f->stride_x;
    __int128 c_lo, c_hi, y_lo, y_hi, x_lo, x_hi;
    channel_range(f, depth, &c_lo, &c_hi);
    for (int t = 0; t < 4; t++) {
        if (rows[t] <= 0 || cols[t] <= 0) continue; /* an empty tile */
        term_range(rows[t], f->stride_y, &y_lo, &y_hi);
        term_range(cols[t], x_step, &x_lo, &x_hi);
        __int128 lo = f->base[t] + y_lo + x_lo + c_lo, hi = f->base[t] + y_hi + x_hi + c_hi + e;
        if (lo < 0 || hi > size) return 0;
    }
    return 1;
}

/* Whether a rescale's shifts are ones its arithmetic is defined for (rescale_wide shifts 128
 * bits: by less than 127; TFL's second shift by less than 63). */
static inline int rescale_fits(int64_t shift, int64_t right, int64_t rounding) {
    return within(shift, 0, 126) && within(right, 0, 62) && within(rounding, TFL, NATURAL);
}

/* Whether every value the output stage's clip leaves indexes a LUT inside lut_size bytes. */
static inline int finish_fits(const finish_desc *f, int64_t lut_size) {
    /* an OFM's values: 32 bits, signed or not */
    const int64_t limit = (int64_t)1 << 32;
    if (!within(f->rounding, TFL, NATURAL) || !within(f->zero_point, -limit, limit) ||
        !within(f->lo, -limit, limit) || !within(f->hi, -limit, limit))
        return 0;
    if (f->lut_offset < 0) return 1;
    int64_t e = f->lut_elem_size, lowest = f->lo < f->hi ? f->lo : f->hi;
    if ((e != 1 && e != 2 && e != 4) || !within(lowest, -LIMIT31, LIMIT31) ||
        !within(f->hi, -LIMIT31, LIMIT31) || !within(f->lut_index_base, -LIMIT31, LIMIT31))
        return 0;
    __int128 first = f->lut_offset + (__int128)(lowest - f->lut_index_base) * e;
    __int128 end = f->lut_offset + (__int128)(f->hi - f->lut_index_base + 1) * e;
    return first >= 0 && end <= lut_size;
}

/* Whether a window's geometry is one the kernels can run: sizes, strides and dilations at
 * least 1, pads at least 0, all below DIM_MAX. */
static inline int geometry_fits(const int64_t *g) { /* kh, kw, sy, sx, dy, dx, 4 pads */
    for (int i = 0; i < 6; i++)
        if (!within(g[i], 1, DIM_MAX)) return 0;
    for (int i = 6; i < 10; i++)
        if (!within(g[i], 0, DIM_MAX)) return 0;
    return 1;
}

/* Whether the extent a window reads, h_in (upscaled: twice the rows, read at y / 2), lies
 * inside `rows` rows. */
static inline int extent_fits(int64_t extent, int64_t upscaled, int64_t rows) {
    return extent >= 0 && (upscaled ? (extent + 1) / 2 : extent) <= rows;
}

#endif
