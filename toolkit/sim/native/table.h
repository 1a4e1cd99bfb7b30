/* run_batch's table (module.c): the row layout that toolkit/sim/native/batch.py packs. */
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
/* The module's interface as batch.py and the kernels' wrappers call it: every kernel takes its
 * memories' sizes (native.h's trust boundary). A build of another interface is not used. */
#define INTERFACE 8

int64_t etk_conv_desc_words(void);
int64_t etk_elementwise_desc_words(void);
int64_t etk_pool_desc_words(void);
int64_t etk_copy_desc_words(void);

#endif
