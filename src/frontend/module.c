/* Modules: named parameters, buffers and children, with a cached structure signature, and
 * tgc_module_to moving every tensor of a tree (with its gradient and the state the handles
 * watching the module, its optimizers, keep for it) to a device. Below the handles over a
 * module (optim.c, ddp.c): they watch it (frontend/watch.h), it never names them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/module_impl.h"
#include "frontend/watch.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "ir/shape_infer.h"
#include "support/error.h"
#include "support/ptr_list.h"
#include "support/strbuf.h"
#include "tgc/autograd.h"

typedef struct mod_tensor {
    char *name;
    tgc_tensor *t;
    int is_buffer;
} mod_tensor;

typedef struct mod_child {
    char *name;
    tgc_module *m;
} mod_child;

/* A typed attribute (tgc_module_set_*): part of the structure signature, values included. */
typedef enum { ATTR_I64, ATTR_F64, ATTR_STR } attr_type;

typedef struct mod_attr {
    char *name;
    attr_type type;
    int64_t i;
    double f;
    char *s; /* owned */
} mod_attr;

struct tgc_module {
    char *name;
    void *userdata;
    int training;
    mod_tensor *tensors;
    int n_tensors, cap_tensors;
    mod_child *children;
    int n_children, cap_children;
    mod_attr *attrs; /* sorted by name: the order they were set in does not matter */
    int n_attrs, cap_attrs;
    tgc_module *parent;
    struct tgc_ddp *ddp;  /* the data-parallel wrapper over this module (not owned) */
    uint64_t ddp_key;     /* its communicator's handle: part of the signature */
    int ddp_sync;         /* its sync flag: part of the signature */
    tgc_ptr_list watches; /* tgc_watch of the handles over this module (its optimizers and
                           * its wrapper, not owned): told when it goes, asked what moves */
    /* derived from the tree, recomputed at every change below this module */
    uint64_t sig;
    tgc_tensor **flat;
    int n_flat, flat_valid;
};

static void refresh(tgc_module *m);
static const tgc_module *flat_owner(const tgc_module *m, int *i);

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

tgc_module *tgc_module_create(const char *name, void *userdata)
{
    if (!name || !*name) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_module_create: name is NULL or empty");
        return NULL;
    }
    tgc_module *m = calloc(1, sizeof *m);
    if (m)
        m->name = dup_str(name);
    if (!m || !m->name) {
        free(m);
        tgc_set_error(TGC_ERR_OOM, "tgc_module_create: out of memory");
        return NULL;
    }
    m->userdata = userdata;
    m->training = 1;
    refresh(m);
    return m;
}

static void free_tree(tgc_module *m)
{
    for (int i = 0; i < m->watches.n; i++) { /* their later calls fail; their frees free */
        tgc_watch *w = m->watches.items[i];
        w->gone(w);
    }
    tgc_ptr_list_free(&m->watches);
    for (int i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        m->tensors[i].t->flags |= TGC_T_DEAD;
        m->tensors[i].t->module = NULL;
        tgc_tensor_unref(m->tensors[i].t);
    }
    for (int i = 0; i < m->n_children; i++) {
        free(m->children[i].name);
        free_tree(m->children[i].m);
    }
    for (int i = 0; i < m->n_attrs; i++) {
        free(m->attrs[i].name);
        free(m->attrs[i].s);
    }
    free(m->attrs);
    free(m->tensors);
    free(m->children);
    free(m->flat);
    free(m->name);
    free(m);
}

void tgc_module_free(tgc_module *m)
{
    if (!m)
        return;
    if (m->parent) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "tgc_module_free: '%s' is a child of '%s'; free the root module instead",
                      m->name, m->parent->name);
        return;
    }
    free_tree(m);
}

/* Signatures and flat lists are recomputed at every change (changes are rare), so that
 * tgc_call only reads them: concurrent calls on one module never write to it. */
void tgc_module_invalidate(tgc_module *m)
{
    for (; m; m = m->parent)
        refresh(m);
}

int tgc_module_name_taken(const tgc_module *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return 1;
    for (int i = 0; i < m->n_children; i++)
        if (strcmp(m->children[i].name, name) == 0)
            return 1;
    for (int i = 0; i < m->n_attrs; i++)
        if (strcmp(m->attrs[i].name, name) == 0)
            return 1;
    return 0;
}

static int check_new_name(const tgc_module *m, const char *name, const char *fn)
{
    if (!m || !name || !*name) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL or empty", fn, m ? "name" : "module");
        return 0;
    }
    if (strchr(name, '.')) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: name '%s' contains '.' (dots join paths)", fn,
                      name);
        return 0;
    }
    /* the description behind recompile reasons is one "path = value" or "path: ..." line
     * per member */
    if (strpbrk(name, "=:\n ")) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: name '%s' contains a space, '=', ':' or a newline; use letters, "
                      "digits and '_'",
                      fn, name);
        return 0;
    }
    if (tgc_module_name_taken(m, name)) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: module '%s' already has a member named '%s'", fn,
                      m->name, name);
        return 0;
    }
    return 1;
}

static tgc_tensor *add_tensor(tgc_module *m, const char *name, const tgc_tensor *init,
                              int is_buffer, const char *fn)
{
    if (!check_new_name(m, name, fn))
        return NULL;
    if (!init) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: init tensor for '%s' is NULL", fn, name);
        return NULL;
    }
    if (init->trace) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: init for '%s' is a traced tensor", fn, name);
        return NULL;
    }
    if (!is_buffer && !tgc_dtype_is_float(init->dtype)) {
        tgc_set_error(TGC_ERR_DTYPE,
                      "%s: '%s' is %s, but a parameter requires gradients, which only f32, f16, "
                      "bf16 and f64 tensors can; keep integer state in tgc_module_buffer",
                      fn, name, tgc_dtype_name(init->dtype));
        return NULL;
    }
    if (m->n_tensors == m->cap_tensors) {
        int cap = m->cap_tensors ? m->cap_tensors * 2 : 8;
        mod_tensor *p = realloc(m->tensors, (size_t)cap * sizeof *p);
        if (!p) {
            tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
            return NULL;
        }
        m->tensors = p;
        m->cap_tensors = cap;
    }
    tgc_tensor *t = tgc_tensor_new(init->shape, init->ndim, init->dtype, init->device);
    char *nm = t ? dup_str(name) : NULL;
    if (!nm) {
        tgc_tensor_free(t);
        tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    tgc_status st = tgc_tensor_copy(t, init); /* init is concrete: a plain copy */
    if (st != TGC_OK) {
        free(nm);
        tgc_tensor_free(t);
        tgc_error_prefix(st, fn);
        return NULL;
    }
    tgc_scope_release(t); /* the module owns it from now on */
    t->flags &= ~(uint32_t)TGC_T_TRACE_CONST;
    t->module = m;
    if (!is_buffer)
        t->flags |= TGC_T_REQUIRES_GRAD;
    m->tensors[m->n_tensors++] = (mod_tensor){nm, t, is_buffer};
    tgc_module_invalidate(m);
    return t;
}

tgc_tensor *tgc_module_param(tgc_module *m, const char *name, const tgc_tensor *init)
{
    return add_tensor(m, name, init, 0, "tgc_module_param");
}

tgc_tensor *tgc_module_buffer(tgc_module *m, const char *name, const tgc_tensor *init)
{
    return add_tensor(m, name, init, 1, "tgc_module_buffer");
}

tgc_status tgc_module_child(tgc_module *parent, const char *name, tgc_module *child)
{
    if (!child)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_module_child: child is NULL");
    if (!check_new_name(parent, name, "tgc_module_child"))
        return tgc_last_status();
    if (child->parent || child == parent)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_module_child: module '%s' already has a parent", child->name);
    for (const tgc_module *a = parent; a; a = a->parent)
        if (a == child)
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "tgc_module_child: '%s' is an ancestor of '%s'", child->name,
                                 parent->name);
    if (parent->n_children == parent->cap_children) {
        int cap = parent->cap_children ? parent->cap_children * 2 : 4;
        mod_child *p = realloc(parent->children, (size_t)cap * sizeof *p);
        if (!p)
            return tgc_set_error(TGC_ERR_OOM, "tgc_module_child: out of memory");
        parent->children = p;
        parent->cap_children = cap;
    }
    char *nm = dup_str(name);
    if (!nm)
        return tgc_set_error(TGC_ERR_OOM, "tgc_module_child: out of memory");
    parent->children[parent->n_children++] = (mod_child){nm, child};
    child->parent = parent;
    tgc_module_invalidate(parent);
    return TGC_OK;
}

static const mod_child *find_child_n(const tgc_module *m, const char *name, size_t len)
{
    for (int i = 0; i < m->n_children; i++)
        if (strncmp(m->children[i].name, name, len) == 0 && m->children[i].name[len] == '\0')
            return &m->children[i];
    return NULL;
}

static const mod_tensor *find_tensor(const tgc_module *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

/* The module that the last part of a dotted path ("layer1.0.bn1.weight") is looked up in,
 * through the children named by the parts before it, with *leaf at that last part. NULL
 * with the error set (fn, naming the part that is missing) when a child is missing. */
static const tgc_module *walk_path(const tgc_module *m, const char *path, const char *fn,
                                   const char **leaf)
{
    const char *p = path;
    for (const char *dot; (dot = strchr(p, '.')) != NULL; p = dot + 1) {
        const mod_child *c = find_child_n(m, p, (size_t)(dot - p));
        if (!c) {
            tgc_set_error(TGC_ERR_INVALID_ARG, "%s: '%s': module '%s' has no child '%.*s'", fn,
                          path, m->name, (int)(dot - p), p);
            return NULL;
        }
        m = c->m;
    }
    *leaf = p;
    return m;
}

tgc_tensor *tgc_module_get(const tgc_module *m, const char *name)
{
    const char *fn = "tgc_module_get", *leaf;
    if (!m || !name) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !m ? "module" : "name");
        return NULL;
    }
    const tgc_module *o = walk_path(m, name, fn, &leaf);
    const mod_tensor *t = o ? find_tensor(o, leaf) : NULL;
    if (o && !t)
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: '%s': module '%s' has no parameter or buffer '%s'%s", fn, name, o->name,
                      leaf,
                      find_child_n(o, leaf, strlen(leaf)) ? " (it is a child module: "
                                                            "tgc_module_get_child)"
                                                          : "");
    return t ? t->t : NULL;
}

tgc_module *tgc_module_get_child(const tgc_module *m, const char *name)
{
    const char *fn = "tgc_module_get_child", *leaf;
    if (!m || !name) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !m ? "module" : "name");
        return NULL;
    }
    const tgc_module *o = walk_path(m, name, fn, &leaf);
    const mod_child *c = o ? find_child_n(o, leaf, strlen(leaf)) : NULL;
    if (o && !c)
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: '%s': module '%s' has no child '%s'%s", fn, name,
                      o->name, leaf,
                      find_tensor(o, leaf) ? " (it is a tensor: tgc_module_get)" : "");
    return c ? c->m : NULL;
}

tgc_tensor *tgc_module_find_local(const tgc_module *m, const char *name)
{
    const mod_tensor *t = m && name ? find_tensor(m, name) : NULL;
    return t ? t->t : NULL;
}

static int count_tensors(const tgc_module *m)
{
    int n = m->n_tensors;
    for (int i = 0; i < m->n_children; i++)
        n += count_tensors(m->children[i].m);
    return n;
}

/* The queries' NULL check, as a tensor query's: keeps an earlier error (the NULL is usually
 * a failed creation's), else TGC_ERR_INVALID_ARG. */
static int null_module(const tgc_module *m, const char *fn)
{
    if (m)
        return 0;
    tgc_keep_error(TGC_ERR_INVALID_ARG, "%s: module is NULL", fn);
    return 1;
}

int tgc_module_num_tensors(const tgc_module *m)
{
    return null_module(m, "tgc_module_num_tensors") ? 0 : count_tensors(m);
}

/* Tensor i of the tree and the module holding it (index *i there), or NULL with the error
 * set. */
static const tgc_module *tensor_owner(const tgc_module *m, int *i, const char *fn)
{
    if (!m) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: module is NULL", fn);
        return NULL;
    }
    int want = *i;
    const tgc_module *o = *i >= 0 ? flat_owner(m, i) : NULL;
    if (!o)
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: index %d is out of range: module '%s' has %d tensors "
                      "(tgc_module_num_tensors)",
                      fn, want, m->name, count_tensors(m));
    return o;
}

tgc_tensor *tgc_module_tensor_at(const tgc_module *m, int i, int *is_buffer)
{
    const tgc_module *o = tensor_owner(m, &i, "tgc_module_tensor_at");
    if (!o)
        return NULL;
    if (is_buffer)
        *is_buffer = o->tensors[i].is_buffer;
    return o->tensors[i].t;
}

int tgc_module_tensor_name(const tgc_module *m, int i, char *buf, size_t n)
{
    int k = i;
    if (!tensor_owner(m, &k, "tgc_module_tensor_name"))
        return -1;
    if (!buf && n) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_module_tensor_name: buf is NULL with n = %zu", n);
        return -1;
    }
    return tgc_module_flat_name(m, i, buf, n, NULL);
}

static void set_training(tgc_module *m, int on)
{
    m->training = on != 0;
    for (int i = 0; i < m->n_children; i++)
        set_training(m->children[i].m, on);
    refresh(m); /* after its children: a subtree's signature covers theirs */
}

void tgc_module_train(tgc_module *m, int on)
{
    if (null_module(m, "tgc_module_train"))
        return;
    set_training(m, on);
    tgc_module_invalidate(m->parent);
}

int tgc_module_is_training(const tgc_module *m)
{
    return null_module(m, "tgc_module_is_training") ? 0 : m->training;
}

/* ---- tgc_module_to ---- */

/* The tensors tgc_module_to moves, in a growing array. */
typedef struct move_list {
    tgc_tensor **t;
    int n, cap;
} move_list;

static int move_add(move_list *l, tgc_tensor *t)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        tgc_tensor **p = realloc(l->t, (size_t)cap * sizeof *p);
        if (!p)
            return 0;
        l->t = p;
        l->cap = cap;
    }
    l->t[l->n++] = t;
    return 1;
}

int tgc_module_in_subtree(const tgc_module *m, const tgc_module *root)
{
    for (; m; m = m->parent)
        if (m == root)
            return 1;
    return 0;
}

static int move_add_cb(void *ctx, tgc_tensor *t)
{
    return move_add(ctx, t);
}

/* The tensors the watchers of m (an optimizer's state) move with root's subtree. */
static int add_watched(move_list *l, const tgc_module *m, const tgc_module *root, tgc_device dev)
{
    for (int i = 0; i < m->watches.n; i++) {
        tgc_watch *w = m->watches.items[i];
        if (w->moving && !w->moving(w, root, dev, move_add_cb, l))
            return 0;
    }
    return 1;
}

static int add_subtree_watched(move_list *l, const tgc_module *m, const tgc_module *root,
                               tgc_device dev)
{
    if (!add_watched(l, m, root, dev))
        return 0;
    for (int i = 0; i < m->n_children; i++)
        if (!add_subtree_watched(l, m->children[i].m, root, dev))
            return 0;
    return 1;
}

/* Everything that moves with m: its tree's tensors, their gradients, and what the watchers
 * of m's subtree and of its ancestors move with it (the state of the optimizers over them,
 * for the parameters below m). */
static int collect_moving(tgc_module *m, tgc_device dev, move_list *l)
{
    int n;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    if (!flat && count_tensors(m) > 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (!move_add(l, flat[i]) || (flat[i]->grad && !move_add(l, flat[i]->grad)))
            return 0;
    if (!add_subtree_watched(l, m, m, dev))
        return 0;
    for (const tgc_module *a = m->parent; a; a = a->parent)
        if (!add_watched(l, a, m, dev))
            return 0;
    return 1;
}

/* Every tensor that moves (see collect_moving) is copied to dev first (the tensor core's
 * copy, as tgc_to), and only when all copies succeeded do the tensors take the new storage:
 * a failure leaves the module, its gradients and its optimizers as they were. Views the
 * caller made of the old tensors keep the old memory. */
tgc_status tgc_module_to(tgc_module *m, tgc_device dev)
{
    if (!m)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_module_to: module is NULL");
    if (!tgc_device_check("tgc_module_to", dev))
        return tgc_last_status();
    /* l.t: the tensors (the flat list itself goes stale at the first invalidation);
     * moved: their copies on dev (NULL where a tensor is there already) */
    move_list l = {0};
    if (!collect_moving(m, dev, &l)) {
        free(l.t);
        return tgc_set_error(TGC_ERR_OOM, "tgc_module_to: out of memory");
    }
    int n = l.n;
    tgc_tensor **ts = l.t, **moved = calloc((size_t)n + 1, sizeof *moved);
    if (!moved) {
        free(ts);
        return tgc_set_error(TGC_ERR_OOM, "tgc_module_to: out of memory");
    }
    tgc_status st = TGC_OK;
    for (int i = 0; i < n && st == TGC_OK; i++)
        if (!tgc_device_equal(ts[i]->device, dev) &&
            !(moved[i] = tgc_tensor_copy_to("tgc_module_to", ts[i], dev)))
            st = tgc_last_status();
    for (int i = 0; i < n; i++) {
        tgc_tensor *t = ts[i], *r = moved[i];
        if (!r)
            continue;
        if (st == TGC_OK) { /* t takes r's storage and geometry; r leaves with t's old one */
            tgc_storage *old = t->storage;
            t->storage = r->storage;
            r->storage = old;
            t->device = dev;
            t->offset = 0;
            memcpy(t->strides, r->strides, sizeof t->strides);
            tgc_module_invalidate(t->module);
        }
        tgc_tensor_free(r);
    }
    free(moved);
    free(ts);
    return st;
}

/* ---- the handles watching the module ---- */

tgc_status tgc_module_watch(tgc_module *m, tgc_watch *w)
{
    return tgc_ptr_list_add(&m->watches, w)
               ? TGC_OK
               : tgc_set_error(TGC_ERR_OOM, "out of memory attaching a handle to module '%s'",
                               m->name);
}

void tgc_module_unwatch(tgc_module *m, tgc_watch *w)
{
    tgc_ptr_list_remove(&m->watches, w);
}

void *tgc_module_userdata(const tgc_module *m)
{
    return null_module(m, "tgc_module_userdata") ? NULL : m->userdata;
}
const char *tgc_module_name(const tgc_module *m)
{
    return null_module(m, "tgc_module_name") ? NULL : m->name;
}

/* ---- attributes ---- */

static const char *const attr_type_name[] = {"i64", "f64", "str"};
static const char *const attr_setter[] = {"tgc_module_set_i64", "tgc_module_set_f64",
                                          "tgc_module_set_str"};
static const char *const attr_reader[] = {"tgc_module_attr_i64", "tgc_module_attr_f64",
                                          "tgc_module_attr_str"};

static mod_attr *find_attr(const tgc_module *m, const char *name)
{
    for (int i = 0; i < m->n_attrs; i++)
        if (strcmp(m->attrs[i].name, name) == 0)
            return &m->attrs[i];
    return NULL;
}

/* The attribute to write: the existing one (of the same type) or a new one in name order. */
static mod_attr *attr_slot(tgc_module *m, const char *name, attr_type type, tgc_status *st)
{
    const char *fn = attr_setter[type];
    *st = TGC_OK;
    if (m && name) {
        mod_attr *a = find_attr(m, name);
        if (a && a->type != type) {
            *st = tgc_set_error(TGC_ERR_DTYPE,
                                "%s: attribute '%s' of module '%s' is an %s (an attribute keeps "
                                "its type); set it with %s",
                                fn, name, m->name, attr_type_name[a->type], attr_setter[a->type]);
            return NULL;
        }
        if (a)
            return a;
    }
    if (!check_new_name(m, name, fn)) {
        *st = tgc_last_status();
        return NULL;
    }
    if (strcmp(name, "training") == 0) { /* describe's "self.training = ..." line */
        *st = tgc_set_error(TGC_ERR_INVALID_ARG,
                            "%s: the name 'training' is the module's training flag; set it with "
                            "tgc_module_train",
                            fn);
        return NULL;
    }
    if (m->n_attrs == m->cap_attrs) {
        int cap = m->cap_attrs ? m->cap_attrs * 2 : 4;
        mod_attr *p = realloc(m->attrs, (size_t)cap * sizeof *p);
        if (!p) {
            *st = tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
            return NULL;
        }
        m->attrs = p;
        m->cap_attrs = cap;
    }
    char *nm = dup_str(name);
    if (!nm) {
        *st = tgc_set_error(TGC_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    int at = 0;
    while (at < m->n_attrs && strcmp(m->attrs[at].name, name) < 0)
        at++;
    memmove(&m->attrs[at + 1], &m->attrs[at], (size_t)(m->n_attrs - at) * sizeof *m->attrs);
    m->attrs[at] = (mod_attr){nm, type, 0, 0, NULL};
    m->n_attrs++;
    return &m->attrs[at];
}

tgc_status tgc_module_set_i64(tgc_module *m, const char *name, int64_t value)
{
    tgc_status st;
    mod_attr *a = attr_slot(m, name, ATTR_I64, &st);
    if (!a)
        return st;
    a->i = value;
    tgc_module_invalidate(m);
    return TGC_OK;
}

tgc_status tgc_module_set_f64(tgc_module *m, const char *name, double value)
{
    tgc_status st;
    mod_attr *a = attr_slot(m, name, ATTR_F64, &st);
    if (!a)
        return st;
    a->f = value;
    tgc_module_invalidate(m);
    return TGC_OK;
}

tgc_status tgc_module_set_str(tgc_module *m, const char *name, const char *value)
{
    if (!value)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_module_set_str: value is NULL");
    char *copy = dup_str(value);
    if (!copy)
        return tgc_set_error(TGC_ERR_OOM, "tgc_module_set_str: out of memory");
    tgc_status st;
    mod_attr *a = attr_slot(m, name, ATTR_STR, &st);
    if (!a) {
        free(copy);
        return st;
    }
    free(a->s);
    a->s = copy;
    tgc_module_invalidate(m);
    return TGC_OK;
}

/* The attribute a reader asks for, or NULL with the error set. */
static const mod_attr *read_attr(const tgc_module *m, const char *name, const void *out,
                                 attr_type type)
{
    const char *fn = attr_reader[type];
    if (!m || !name || !out) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                      !m      ? "module"
                      : !name ? "name"
                              : "out");
        return NULL;
    }
    const char *leaf;
    const tgc_module *o = walk_path(m, name, fn, &leaf);
    if (!o)
        return NULL;
    const mod_attr *a = find_attr(o, leaf);
    if (!a) {
        tgc_set_error(TGC_ERR_INVALID_ARG,
                      "%s: module '%s' has no attribute '%s' (set it with %s before the call)", fn,
                      o->name, leaf, attr_setter[type]);
        return NULL;
    }
    if (a->type != type) {
        tgc_set_error(TGC_ERR_DTYPE, "%s: attribute '%s' of module '%s' is an %s; read it with %s",
                      fn, leaf, o->name, attr_type_name[a->type], attr_reader[a->type]);
        return NULL;
    }
    return a;
}

tgc_status tgc_module_attr_i64(const tgc_module *m, const char *name, int64_t *out)
{
    const mod_attr *a = read_attr(m, name, out, ATTR_I64);
    if (!a)
        return tgc_last_status();
    *out = a->i;
    return TGC_OK;
}

tgc_status tgc_module_attr_f64(const tgc_module *m, const char *name, double *out)
{
    const mod_attr *a = read_attr(m, name, out, ATTR_F64);
    if (!a)
        return tgc_last_status();
    *out = a->f;
    return TGC_OK;
}

tgc_status tgc_module_attr_str(const tgc_module *m, const char *name, const char **out)
{
    const mod_attr *a = read_attr(m, name, out, ATTR_STR);
    if (!a)
        return tgc_last_status();
    *out = a->s;
    return TGC_OK;
}

/* ---- flat list and signature ---- */

static void flatten_into(const tgc_module *m, tgc_tensor **out, int *k)
{
    for (int i = 0; i < m->n_tensors; i++)
        out[(*k)++] = m->tensors[i].t;
    for (int i = 0; i < m->n_children; i++)
        flatten_into(m->children[i].m, out, k);
}

static uint64_t hash_tree(const tgc_module *m, uint64_t h);

static void refresh(tgc_module *m)
{
    m->sig = hash_tree(m, 0xcbf29ce484222325ull);
    int count = count_tensors(m);
    tgc_tensor **p = realloc(m->flat, (size_t)(count ? count : 1) * sizeof *p);
    m->flat_valid = p != NULL;
    if (!p)
        return; /* retried by tgc_module_flat */
    m->flat = p;
    m->n_flat = 0;
    flatten_into(m, m->flat, &m->n_flat);
}

/* Finds flat index *i below m (pre-order, as flatten_into): the module holding it and its
 * index there. NULL when out of range. */
static const tgc_module *flat_owner(const tgc_module *m, int *i)
{
    if (*i < m->n_tensors)
        return m;
    *i -= m->n_tensors;
    for (int c = 0; c < m->n_children; c++) {
        const tgc_module *o = flat_owner(m->children[c].m, i);
        if (o)
            return o;
    }
    return NULL;
}

/* x's name in its parent's list of children. */
static const char *child_name(const tgc_module *x)
{
    for (int c = 0; c < x->parent->n_children; c++)
        if (x->parent->children[c].m == x)
            return x->parent->children[c].name;
    return "";
}

/* Writes s at position pos of the path (as much of it as fits before buf[n - 1]). */
static void put_at(char *buf, size_t n, size_t pos, const char *s, size_t len)
{
    for (size_t k = 0; k < len && pos + k + 1 < n; k++)
        buf[pos + k] = s[k];
}

/* The path is assembled from its end (the tensor's name, then each module up to m), so that
 * any depth and length fits without a temporary. */
int tgc_module_flat_name(const tgc_module *m, int i, char *buf, size_t n, int *is_buffer)
{
    const tgc_module *o = m && i >= 0 ? flat_owner(m, &i) : NULL;
    if (!o)
        return -1;
    if (is_buffer)
        *is_buffer = o->tensors[i].is_buffer;
    size_t len = strlen(o->tensors[i].name);
    for (const tgc_module *x = o; x != m; x = x->parent)
        len += strlen(child_name(x)) + 1;
    size_t pos = len - strlen(o->tensors[i].name);
    put_at(buf, n, pos, o->tensors[i].name, len - pos);
    for (const tgc_module *x = o; x != m; x = x->parent) {
        const char *nm = child_name(x);
        size_t l = strlen(nm);
        pos -= l + 1;
        put_at(buf, n, pos, nm, l);
        put_at(buf, n, pos + l, ".", 1);
    }
    if (n > 0)
        buf[len < n ? len : n - 1] = '\0';
    return (int)len;
}

tgc_tensor *const *tgc_module_flat(tgc_module *m, int *n)
{
    if (!m->flat_valid)
        refresh(m);
    *n = m->flat_valid ? m->n_flat : 0;
    return m->flat_valid ? m->flat : NULL;
}

/* An attribute's value as recompile reasons print it: integers exactly, floats in the
 * shortest form that reads back to the same double, strings quoted with \n and \" escaped. */
static void describe_value(const mod_attr *a, tgc_strbuf *sb)
{
    if (a->type == ATTR_I64) {
        tgc_sb_printf(sb, "%lld", (long long)a->i);
    } else if (a->type == ATTR_F64) {
        char buf[40];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, a->f);
            if (strtod(buf, NULL) == a->f || a->f != a->f)
                break;
        }
        tgc_sb_puts(sb, buf);
    } else {
        tgc_sb_puts(sb, "\"");
        for (const char *c = a->s; *c; c++) {
            if (*c == '\n')
                tgc_sb_puts(sb, "\\n");
            else if (*c == '"' || *c == '\\')
                tgc_sb_printf(sb, "\\%c", *c);
            else
                tgc_sb_printf(sb, "%c", *c);
        }
        tgc_sb_puts(sb, "\"");
    }
}

static void describe_into(const tgc_module *m, const char *path, tgc_strbuf *sb)
{
    tgc_sb_printf(sb, "%s.training = %s\n", path, m->training ? "true" : "false");
    if (m->ddp)
        tgc_sb_printf(sb, "%s.ddp sync = %s\n", path, m->ddp_sync ? "on" : "off");
    for (int i = 0; i < m->n_attrs; i++) {
        tgc_sb_printf(sb, "%s.%s = ", path, m->attrs[i].name);
        describe_value(&m->attrs[i], sb);
        tgc_sb_puts(sb, "\n");
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const tgc_tensor *t = m->tensors[i].t;
        char dims[200];
        tgc_sb_printf(sb, "%s.%s: %s %s%s %s%s\n", path, m->tensors[i].name,
                      m->tensors[i].is_buffer ? "buffer" : "param", tgc_dtype_name(t->dtype),
                      tgc_format_dims(t->shape, t->ndim, dims, sizeof dims),
                      t->device.type == TGC_DEVICE_CPU ? "cpu" : "cuda",
                      (t->flags & TGC_T_REQUIRES_GRAD) ? " requires_grad" : "");
    }
    for (int i = 0; i < m->n_children; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", path, m->children[i].name);
        describe_into(m->children[i].m, sub, sb);
    }
}

char *tgc_module_describe(const tgc_module *m)
{
    tgc_strbuf sb = {0};
    describe_into(m, "self", &sb);
    return tgc_sb_take(&sb);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_tree(const tgc_module *m, uint64_t h)
{
    h = fnv(h, &m->training, sizeof m->training);
    if (m->ddp) { /* a data-parallel step all-reduces, and only with sync on */
        h = fnv(h, &m->ddp_key, sizeof m->ddp_key);
        h = fnv(h, &m->ddp_sync, sizeof m->ddp_sync);
    }
    h = fnv(h, &m->n_tensors, sizeof m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) {
        const tgc_tensor *t = m->tensors[i].t;
        int meta[5] = {(int)t->dtype, t->ndim, (int)t->device.type, t->device.index,
                       (int)(t->flags & TGC_T_REQUIRES_GRAD) | (m->tensors[i].is_buffer << 4)};
        h = fnv(h, m->tensors[i].name, strlen(m->tensors[i].name) + 1);
        h = fnv(h, meta, sizeof meta);
        h = fnv(h, t->shape, (size_t)t->ndim * sizeof(int64_t));
    }
    h = fnv(h, &m->n_attrs, sizeof m->n_attrs);
    for (int i = 0; i < m->n_attrs; i++) {
        const mod_attr *a = &m->attrs[i];
        int type = (int)a->type;
        h = fnv(h, a->name, strlen(a->name) + 1);
        h = fnv(h, &type, sizeof type);
        if (a->type == ATTR_I64)
            h = fnv(h, &a->i, sizeof a->i);
        else if (a->type == ATTR_F64)
            h = fnv(h, &a->f, sizeof a->f);
        else
            h = fnv(h, a->s, strlen(a->s) + 1);
    }
    h = fnv(h, &m->n_children, sizeof m->n_children);
    for (int i = 0; i < m->n_children; i++) {
        h = fnv(h, m->children[i].name, strlen(m->children[i].name) + 1);
        h = hash_tree(m->children[i].m, h);
    }
    return h;
}

tgc_status tgc_module_set_ddp(tgc_module *m, struct tgc_ddp *d, uint64_t key, int sync)
{
    if (d && m->ddp && m->ddp != d)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_ddp_create: module '%s' is already data-parallel", m->name);
    m->ddp = d;
    m->ddp_key = d ? key : 0;
    m->ddp_sync = d ? sync != 0 : 0;
    tgc_module_invalidate(m);
    return TGC_OK;
}

struct tgc_ddp *tgc_module_ddp(const tgc_module *m)
{
    return m ? m->ddp : NULL;
}

uint64_t tgc_module_signature(const tgc_module *cm)
{
    if (!cm)
        return 0;
    return cm->sig;
}
