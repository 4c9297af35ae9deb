/* A growable list of pointers the holder does not own: the handles that refer to an object
 * and must be told when it goes (a module's optimizers, a process group's data-parallel
 * wrappers). Not thread-safe: the holder's own rules apply. */
#ifndef TGC_SUPPORT_PTR_LIST_H
#define TGC_SUPPORT_PTR_LIST_H

typedef struct tgc_ptr_list {
    void **items;
    int n, cap;
} tgc_ptr_list;

/* Appends p; 0 when out of memory (the list is unchanged). */
int tgc_ptr_list_add(tgc_ptr_list *l, void *p);
/* Removes the first p, keeping the order of the others; nothing when p is absent. */
void tgc_ptr_list_remove(tgc_ptr_list *l, const void *p);
void tgc_ptr_list_free(tgc_ptr_list *l);

#endif
