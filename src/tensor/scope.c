/* Per-thread scopes: every tensor a user sees belongs to exactly one. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "tensor/grad_mode.h"
#include "tensor/scope.h"
#include "tensor/tensor_impl.h"
#include "support/error.h"
#include "support/log.h"

/* The root scope of a thread holding this many tensors is logged as a warning (and again
 * at every tenfold): a host loop that makes tensors outside any scope grows it without
 * bound, and nothing else would say so. */
#define ROOT_WARN_FIRST 100000

struct tgc_scope {
    tgc_tensor *head;
    int64_t n;         /* tensors it owns */
    int64_t next_warn; /* the root's: the count that warns next (0: ROOT_WARN_FIRST) */
    struct tgc_scope *parent;
    /* Opened by the library around a model function (tgc_scope_frame_push): the function
     * may push and pop scopes of its own inside it, but never pop it or keep past it. */
    int frame;
    int grad_prev_floor; /* a frame's: the no-grad floor to restore when it closes */
};

static _Thread_local tgc_scope root_scope;
static _Thread_local tgc_scope *innermost;

/* A thread-specific key whose destructor frees the thread's scopes when it exits. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void unwind_all(void);

static void on_thread_exit(void *unused)
{
    (void)unused;
    unwind_all(); /* frames included: a thread may exit from inside a model function */
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, on_thread_exit);
}

static tgc_scope *current(void)
{
    if (!innermost) {
        innermost = &root_scope;
        pthread_once(&exit_once, make_exit_key);
        pthread_setspecific(exit_key, &root_scope);
    }
    return innermost;
}

static void root_grew(tgc_scope *root)
{
    if (!root->next_warn)
        root->next_warn = ROOT_WARN_FIRST;
    if (root->n < root->next_warn)
        return;
    tgc_log_msg(NULL, 0,
                "tgc: the root scope of this thread holds %lld tensors; a tensor made outside "
                "every tgc_scope_push / tgc_scope_pop lives until tgc_shutdown or thread exit: "
                "wrap each iteration of a loop in a scope (tgc_scope_depth and "
                "tgc_live_tensor_count show where tensors accumulate)",
                (long long)root->n);
    root->next_warn = root->next_warn > INT64_MAX / 10 ? INT64_MAX : root->next_warn * 10;
}

/* Links t at the front of s. */
static void link_front(tgc_tensor *t, tgc_scope *s)
{
    t->scope = s;
    t->prev = NULL;
    t->next = s->head;
    if (s->head)
        s->head->prev = t;
    s->head = t;
    s->n++;
    if (s == &root_scope && s->n >= s->next_warn)
        root_grew(s);
}

void tgc_scope_adopt(tgc_tensor *t)
{
    link_front(t, current());
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
    s->n--;
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

/* Closes the innermost scope, whatever it is. */
static void pop_innermost(void)
{
    tgc_scope *s = current();
    free_all(s);
    innermost = s->parent;
    free(s);
}

tgc_status tgc_scope_pop(void)
{
    tgc_scope *s = current();
    if (s == &root_scope)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_scope_pop: no scope to pop (the root scope stays open; "
                             "pair every tgc_scope_push with one pop)");
    if (s->frame)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_scope_pop: the innermost scope is the one tgc_call opened "
                             "around the model function: the model function popped a scope it "
                             "did not push (nothing was freed; pair every tgc_scope_push with "
                             "one tgc_scope_pop inside the function)");
    pop_innermost();
    return TGC_OK;
}

tgc_scope *tgc_scope_frame_push(void)
{
    tgc_scope *s = calloc(1, sizeof *s);
    if (!s) {
        tgc_set_error(TGC_ERR_OOM, "tgc_call: out of memory opening the function's scope");
        return NULL;
    }
    s->frame = 1;
    s->grad_prev_floor = tgc_grad_frame_enter();
    s->parent = current();
    innermost = s;
    return s;
}

/* Moves t from its scope to the front of scope to. */
static void move_to(tgc_tensor *t, tgc_scope *to)
{
    tgc_scope_release(t);
    link_front(t, to);
}

int tgc_scope_depth(void)
{
    int depth = 0;
    for (const tgc_scope *s = current(); s != &root_scope; s = s->parent)
        depth++;
    return depth;
}

void tgc_scope_frame_handoff(tgc_scope *frame, tgc_tensor *t)
{
    move_to(t, frame->parent);
}

tgc_status tgc_scope_frame_pop(tgc_scope *frame, const char *fn_name, tgc_status st)
{
    int left_open = 0;
    for (tgc_scope *s = current(); s != frame && s != &root_scope; s = current()) {
        pop_innermost();
        left_open++;
    }
    int left_no_grad = tgc_grad_frame_leave(frame->grad_prev_floor);
    if (current() == frame)
        pop_innermost();
    if (st != TGC_OK)
        return st;
    if (left_open)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_call: '%s' returned with %d scope%s it pushed still open "
                             "(they were closed); pair every tgc_scope_push with one "
                             "tgc_scope_pop inside the function",
                             fn_name, left_open, left_open == 1 ? "" : "s");
    if (left_no_grad)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_call: '%s' returned with %d no-grad level%s it pushed still "
                             "open (grad mode was restored); pair every tgc_no_grad_push with "
                             "one tgc_no_grad_pop inside the function",
                             fn_name, left_no_grad, left_no_grad == 1 ? "" : "s");
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
    if (s == &root_scope)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_scope_keep: tensor is in the root scope, which has no "
                             "enclosing scope (it lives until tgc_shutdown or thread exit)");
    if (s->frame)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_scope_keep: tensor is in the scope tgc_call opened around the "
                             "model function; a model function cannot keep tensors past its "
                             "call (return them through out[])");
    move_to(t, s->parent);
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
    if (t->grad_of) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_tensor_free: tensor is the gradient of another tensor (tgc_grad) and "
                      "lives as long as it");
        return;
    }
    tgc_scope_release(t);
    t->flags |= TGC_T_DEAD;
    tgc_tensor_unref(t);
}

static void unwind_all(void)
{
    while (current() != &root_scope)
        pop_innermost();
    free_all(&root_scope);
}

void tgc_shutdown(void)
{
    for (const tgc_scope *s = current(); s != &root_scope; s = s->parent)
        if (s->frame) {
            tgc_set_error(TGC_ERR_INVALID_ARG,
                          "tgc_shutdown: called inside a model function run by tgc_call "
                          "(nothing was freed; call it after tgc_call returns)");
            return;
        }
    unwind_all();
}
