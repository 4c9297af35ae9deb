/* Per-thread scopes: every tensor a user sees belongs to exactly one. */
#include <pthread.h>
#include <stdlib.h>

#include "frontend/tensor_impl.h"
#include "frontend/trace.h"
#include "support/error.h"

typedef struct tgc_scope {
    tgc_tensor *head;
    struct tgc_scope *parent;
} tgc_scope;

static _Thread_local tgc_scope root_scope;
static _Thread_local tgc_scope *innermost;

/* A thread-specific key whose destructor frees the thread's scopes when it exits. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void on_thread_exit(void *unused)
{
    (void)unused;
    tgc_shutdown();
}

static void make_exit_key(void) { pthread_key_create(&exit_key, on_thread_exit); }

static tgc_scope *current(void)
{
    if (!innermost) {
        innermost = &root_scope;
        pthread_once(&exit_once, make_exit_key);
        pthread_setspecific(exit_key, &root_scope);
    }
    return innermost;
}

void tgc_scope_adopt(tgc_tensor *t)
{
    tgc_scope *s = current();
    t->scope = s;
    t->prev = NULL;
    t->next = s->head;
    if (s->head)
        s->head->prev = t;
    s->head = t;
}

void tgc_scope_release(tgc_tensor *t)
{
    tgc_scope *s = t->scope;
    if (!s)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        s->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->scope = NULL;
    t->prev = t->next = NULL;
}

void tgc_scope_push(void)
{
    tgc_scope *s = calloc(1, sizeof *s);
    if (!s) {
        /* Tensors then go to the enclosing scope; the error says so. */
        tgc_set_error(TGC_ERR_OOM, "tgc_scope_push: out of memory");
        return;
    }
    s->parent = current();
    innermost = s;
}

static void free_all(tgc_scope *s)
{
    while (s->head) {
        tgc_tensor *t = s->head;
        tgc_scope_release(t);
        t->flags |= TGC_T_DEAD;
        tgc_tensor_unref(t);
    }
}

tgc_status tgc_scope_pop(void)
{
    tgc_scope *s = current();
    if (s == &root_scope)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_scope_pop: no scope to pop (the root scope stays open; "
                             "pair every tgc_scope_push with one pop)");
    free_all(s);
    innermost = s->parent;
    free(s);
    return TGC_OK;
}

tgc_status tgc_scope_keep(tgc_tensor *t)
{
    if (!t)
        return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_scope_keep: tensor is NULL");
    if (!t->scope)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_scope_keep: tensor is not owned by a scope (a module "
                             "parameter or buffer?)");
    tgc_scope *s = t->scope;
    tgc_scope *to = s->parent ? s->parent : s;
    tgc_scope_release(t);
    t->scope = to;
    t->next = to->head;
    if (to->head)
        to->head->prev = t;
    to->head = t;
    return TGC_OK;
}

void tgc_tensor_free(tgc_tensor *t)
{
    if (!t || (t->flags & TGC_T_DEAD))
        return;
    if (t->module) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_tensor_free: tensor belongs to a module; free the module instead");
        return;
    }
    tgc_scope_release(t);
    t->flags |= TGC_T_DEAD;
    tgc_tensor_unref(t);
}

void tgc_shutdown(void)
{
    while (current() != &root_scope)
        tgc_scope_pop();
    free_all(&root_scope);
}
