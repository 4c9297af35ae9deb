/* Public structs of the caller's size (struct_size.h says the policy). */
#include <string.h>

#include "support/error.h"
#include "support/struct_size.h"

tgc_status tgc_struct_read(const char *fn, const char *what, const char *hint, void *dst,
                           size_t known, size_t min, const void *src, size_t size)
{
    if (size < min)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: %s is %zu bytes, less than the %zu of the smallest accepted "
                             "struct%s",
                             fn, what, size, min, hint);
    const unsigned char *s = src;
    for (size_t i = known; i < size; i++)
        if (s[i])
            return tgc_set_error(TGC_ERR_UNSUPPORTED,
                                 "%s: %s is %zu bytes, more than the %zu this libtgc knows, "
                                 "and byte %zu is not zero (a field of a newer header); leave "
                                 "such fields zero or use the libtgc of that header",
                                 fn, what, size, known, i);
    memcpy(dst, src, size < known ? size : known);
    return TGC_OK;
}

tgc_status tgc_struct_write(const char *fn, const char *what, void *dst, size_t size,
                            const void *src, size_t known, size_t min)
{
    if (size < min)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: %s is %zu bytes, less than the %zu of the smallest accepted "
                             "struct",
                             fn, what, size, min);
    memcpy(dst, src, size < known ? size : known);
    if (size > known)
        memset((unsigned char *)dst + known, 0, size - known);
    return TGC_OK;
}
