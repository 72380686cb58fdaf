#include <stddef.h>
void qsort(void *, size_t, size_t, int (*)(const void *, const void *));
