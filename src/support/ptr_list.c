#include "support/ptr_list.h"

#include <stdlib.h>
#include <string.h>

int tgc_ptr_list_add(tgc_ptr_list *l, void *p)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 2;
        void **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items)
            return 0;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = p;
    return 1;
}

void tgc_ptr_list_remove(tgc_ptr_list *l, const void *p)
{
    for (int i = 0; i < l->n; i++)
        if (l->items[i] == p) {
            memmove(&l->items[i], &l->items[i + 1], (size_t)(l->n - i - 1) * sizeof *l->items);
            l->n--;
            return;
        }
}

void tgc_ptr_list_free(tgc_ptr_list *l)
{
    free(l->items);
    *l = (tgc_ptr_list){0};
}
