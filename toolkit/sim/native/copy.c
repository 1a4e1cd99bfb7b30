/* A strided copy between memories, every element read before any is written (so source and
 * destination may overlap): DMA (dma.py) and the runs of 1x1 pools Vela builds transposes from
 * (pool.ByteMap.merged_run), which copy bytes or map each through a 256-entry table. Python packs
 * copy_desc (native/copy.py). */
#include "native.h"

#define COPY_DIMS 4

typedef struct { /* native/copy.py packs it */
    int64_t src_offset, dst_offset, elem_size, mapped; /* mapped: through the byte table */
    int64_t shape[COPY_DIMS], src_strides[COPY_DIMS], dst_strides[COPY_DIMS];
} copy_desc;

int64_t etk_copy_desc_words(void) { return sizeof(copy_desc) / sizeof(int64_t); }

/* One row of n elements of e bytes between strided (at stride) and packed; the usual element
 * sizes as typed loads and stores (a memcpy call per element was most of a transpose's time). */
static inline void move_row(uint8_t *strided, uint8_t *packed, int64_t n, int64_t e,
                            int64_t stride, int to_packed) {
#define MOVE_ROW(type)                                                                         \
    for (int64_t l = 0; l < n; l++) {                                                          \
        type *s = (type *)(strided + l * stride), *q = (type *)packed + l;                     \
        if (to_packed) memcpy(q, s, sizeof(type));                                             \
        else memcpy(s, q, sizeof(type));                                                       \
    }
    if (stride == e) {
        if (to_packed) memcpy(packed, strided, (size_t)(n * e));
        else memcpy(strided, packed, (size_t)(n * e));
    } else if (e == 1) {
        MOVE_ROW(uint8_t)
    } else if (e == 2) {
        MOVE_ROW(uint16_t)
    } else if (e == 4) {
        MOVE_ROW(uint32_t)
    } else {
        for (int64_t l = 0; l < n; l++) {
            if (to_packed) memcpy(packed + l * e, strided + l * stride, (size_t)e);
            else memcpy(strided + l * stride, packed + l * e, (size_t)e);
        }
    }
#undef MOVE_ROW
}

/* Moves the elements between `strided` (at `strides`) and the packed buffer, in index order. */
static void move(uint8_t *strided, uint8_t *packed, const copy_desc *d, const int64_t *strides,
                 int to_packed) {
    const int64_t *n = d->shape, e = d->elem_size;
    int64_t row = n[3] * e;
    for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
            for (int64_t k = 0; k < n[2]; k++) {
                uint8_t *p = strided + i * strides[0] + j * strides[1] + k * strides[2];
                move_row(p, packed, n[3], e, strides[3], to_packed);
                packed += row;
            }
}

/* Whether every element read and written lies inside the source's and destination's bytes. */
static int copy_fits(const copy_desc *d, int64_t table, int64_t src_size, int64_t dst_size) {
    if (!within(d->elem_size, 1, 16) || (d->mapped && (d->elem_size != 1 || table == 0))) return 0;
    __int128 elements = 1, src[COPY_DIMS], dst[COPY_DIMS];
    for (int i = 0; i < COPY_DIMS; i++) {
        if (!within(d->shape[i], 0, ELEMENTS_MAX)) return 0;
        elements *= d->shape[i];
        src[i] = d->src_strides[i];
        dst[i] = d->dst_strides[i];
    }
    return elements * d->elem_size <= ELEMENTS_MAX &&
           span_fits(d->src_offset, d->shape, src, COPY_DIMS, d->elem_size, src_size) &&
           span_fits(d->dst_offset, d->shape, dst, COPY_DIMS, d->elem_size, dst_size);
}

/* table: when d->mapped, 256 bytes (elem_size 1, a byte table native/copy.py made with the
 * description): the byte written for each byte read.
 * sizes: the bytes of the source's and destination's memories. */
int etk_copy(const void *desc, int64_t src_mem, int64_t dst_mem, int64_t table,
             int64_t src_size, int64_t dst_size) {
    const copy_desc *given = desc;
    if (!copy_fits(given, table, src_size, dst_size)) return OUTSIDE;
    /* axes of one element left out (the outer ones made 1): a transpose's innermost axis is
     * often one element, which made every element a row of its own */
    copy_desc d = *given;
    int kept = COPY_DIMS;
    for (int i = COPY_DIMS - 1; i >= 0; i--) {
        if (given->shape[i] == 1) continue;
        kept--;
        d.shape[kept] = given->shape[i];
        d.src_strides[kept] = given->src_strides[i];
        d.dst_strides[kept] = given->dst_strides[i];
    }
    for (int i = 0; i < kept; i++) d.shape[i] = 1, d.src_strides[i] = d.dst_strides[i] = 0;
    int64_t bytes = d.elem_size;
    for (int i = 0; i < COPY_DIMS; i++) bytes *= d.shape[i];
    if (bytes <= 0) return 0;
    uint8_t *packed = malloc(bytes);
    if (packed == NULL) return 1;
    move((uint8_t *)(intptr_t)src_mem + d.src_offset, packed, &d, d.src_strides, 1);
    if (d.mapped) {
        const uint8_t *t = (const uint8_t *)(intptr_t)table;
        for (int64_t i = 0; i < bytes; i++) packed[i] = t[packed[i]];
    }
    move((uint8_t *)(intptr_t)dst_mem + d.dst_offset, packed, &d, d.dst_strides, 0);
    free(packed);
    return 0;
}
