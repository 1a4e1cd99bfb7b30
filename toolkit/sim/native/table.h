/* run_batch's table (module.c) and a plan image's file (image.c): the row layout that
 * toolkit/sim/native/batch.py packs, and the check that a table read from a file can run. */
#ifndef ETK_TABLE_H
#define ETK_TABLE_H

#include <stddef.h>
#include <stdint.h>

enum {
    KERNEL_CONV = 0,
    KERNEL_ELEMENTWISE = 1,
    KERNEL_POOL = 2,
    KERNEL_COPY = 3,
    KERNEL_CHECK = 4,
};
#define ROW_WORDS 11
#define MEMORY_SLOTS 9   /* regions 0-7, then the SHRAM */
#define SHRAM_SLOT 8
#define ADDRESS_WORD 5   /* the description's address, then the arrays' */
#define CHECK_WORDS 2    /* a check row's description: offset, length */
/* The module's interface as batch.py and plan_image.py call it: run_batch's arguments (memory
 * as buffers) and the layout of a plan image's file (image.c). A build of another interface is
 * not used. */
#define INTERFACE 7

int64_t etk_conv_desc_words(void);
int64_t etk_elementwise_desc_words(void);
int64_t etk_pool_desc_words(void);
int64_t etk_copy_desc_words(void);

/* Whether `rows` rows of a plan image's table can run with its blob (blob_size bytes, 16-byte
 * aligned): each names a kernel and memory slots that exist, and every address word is an
 * offset inside the blob (a description's whole words too). Marks the slots used in `used`. */
int etk_table_fits(const int64_t *table, int64_t rows, const void *blob, uint64_t blob_size,
                   int used[MEMORY_SLOTS]);

#endif
