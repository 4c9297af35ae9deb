/* A BERT encoder for libtgc, header-only (inference; the layout of Hugging Face's BertModel
 * without the pooler).
 *
 *   embeddings: word + position + token_type, LayerNorm
 *   N x layer:  self-attention (query/key/value linears, scores = q k^T / sqrt(d) + mask,
 *               softmax, context = p v), output linear, residual, LayerNorm,
 *               intermediate linear + GELU (erf form), output linear, residual, LayerNorm
 *
 * Parameter names follow Hugging Face's state_dict: "embeddings.word_embeddings.weight",
 * "encoder.layer.3.attention.self.query.weight", "encoder.layer.3.output.LayerNorm.bias", ...
 *
 *   bert_config cfg = bert_base_config();             // 768, 12 layers, 12 heads, 3072
 *   tgc_module *m = bert_create(&cfg);                // eval mode; NULL on error
 *   tgc_tensor *in[4];
 *   bert_make_inputs(&cfg, batch, seq, pad, 1, in);   // ids, token types, mask, positions
 *   tgc_tensor *hidden;                               // f32 [batch, seq, cfg.hidden]
 *   bert_forward(m, in, 4, &hidden, 1);               // eager, or through tgc_compile
 *   bert_free(m);
 *
 * Inputs of bert_forward:
 *   in[0] input_ids      i64/i32 [B, S]
 *   in[1] token_type_ids i64/i32 [B, S]
 *   in[2] attention_mask [B, S] of 0/1 (any dtype; 0 = padding), made additive as
 *         (mask - 1) * 10000 and broadcast over heads and query positions
 *   in[3] position_ids   i64/i32 [1, S] or [B, S] (0, 1, ..., S-1); optional: with n_in = 3
 *         the function makes 0..S-1 itself (on the device of input_ids) with
 *         tgc_arange_sym(0, tgc_sym_size(ids, 1)),
 *         which keeps S symbolic (reading it with tgc_size would specialize it and defeat
 *         dynamic sequence lengths).
 *
 * The attention is written as matmul, scale, mask add, softmax, matmul (the formulation a
 * compiler fuses); cfg.use_sdpa switches to tgc_scaled_dot_product_attention with the same
 * additive mask.
 *
 * The hyperparameters the forward pass reads are attributes of the root module, named as
 * in Hugging Face's BertConfig: "hidden_size", "num_hidden_layers", "num_attention_heads"
 * (i64), "layer_norm_eps" (f64) and "use_sdpa" (i64). Compiled variants are guarded on
 * them, so two BERTs whose parameters have equal shapes but whose head counts differ may
 * share one tgc_fn: the second recompiles with "self.num_attention_heads changed (12 -> 6)".
 * (A value kept in the module's userdata would be invisible to the guards.)
 *
 * Weights come from a fixed-seed generator of this header (the library's Philox stream is
 * left alone): linear and embedding weights normal(0, 0.02) as in BERT's init, biases
 * normal(0, 0.02) and LayerNorm gamma 1 + normal(0, 0.02) so that no parameter is trivial. */
#ifndef TGC_EXAMPLES_MODELS_BERT_H
#define TGC_EXAMPLES_MODELS_BERT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tgc/tgc.h>

typedef struct bert_config {
    int hidden;       /* 768 */
    int layers;       /* 12 */
    int heads;        /* 12; must divide hidden */
    int intermediate; /* 3072 */
    int vocab;        /* 30522 */
    int max_pos;      /* 512 */
    int type_vocab;   /* 2 */
    double ln_eps;    /* 1e-12 */
    int use_sdpa;     /* 0: matmul/softmax/matmul; 1: tgc_scaled_dot_product_attention */
    uint64_t seed;    /* weights are a pure function of the config, seed included */
} bert_config;

static inline bert_config bert_base_config(void)
{
    bert_config c = {768, 12, 12, 3072, 30522, 512, 2, 1e-12, 0, 0xbe27u};
    return c;
}

/* ---- a small deterministic generator (splitmix64 + Box-Muller) ---- */
typedef struct bert_rng {
    uint64_t state;
} bert_rng;

static inline double bert_rng_uniform(bert_rng *r) /* [0, 1) */
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static inline double bert_rng_normal(bert_rng *r)
{
    double u1 = 1.0 - bert_rng_uniform(r), u2 = bert_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Adds a parameter filled with mean + std * normal. */
static inline int bert_add(tgc_module *m, const char *name, const int64_t *shape, int ndim,
                           double mean, double std, bert_rng *rng)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *data = malloc((size_t)n * sizeof(float));
    if (!data)
        return 0;
    for (int64_t i = 0; i < n; i++)
        data[i] = (float)(mean + std * bert_rng_normal(rng));
    tgc_scope_push();
    tgc_tensor *init =
        tgc_from_data(data, (size_t)n * sizeof(float), shape, ndim, TGC_F32, tgc_cpu());
    tgc_tensor *t = init ? tgc_module_param(m, name, init) : NULL;
    tgc_scope_pop();
    free(data);
    return t != NULL;
}

static inline tgc_module *bert_child(tgc_module *parent, const char *name)
{
    tgc_module *c = tgc_module_create(name, NULL);
    if (c && tgc_module_child(parent, name, c) != TGC_OK) {
        tgc_module_free(c);
        return NULL;
    }
    return c;
}

static inline int bert_linear(tgc_module *parent, const char *name, int64_t out, int64_t in,
                              bert_rng *rng)
{
    tgc_module *l = bert_child(parent, name);
    int64_t ws[2] = {out, in};
    return l && bert_add(l, "weight", ws, 2, 0.0, 0.02, rng) &&
           bert_add(l, "bias", &out, 1, 0.0, 0.02, rng);
}

static inline int bert_layer_norm(tgc_module *parent, int64_t n, bert_rng *rng)
{
    tgc_module *l = bert_child(parent, "LayerNorm");
    return l && bert_add(l, "weight", &n, 1, 1.0, 0.02, rng) &&
           bert_add(l, "bias", &n, 1, 0.0, 0.02, rng);
}

static inline int bert_embedding(tgc_module *parent, const char *name, int64_t rows, int64_t dim,
                                 bert_rng *rng)
{
    tgc_module *e = bert_child(parent, name);
    int64_t ws[2] = {rows, dim};
    return e && bert_add(e, "weight", ws, 2, 0.0, 0.02, rng);
}

static inline int bert_encoder_layer(tgc_module *list, int index, const bert_config *c,
                                     bert_rng *rng)
{
    char name[32];
    snprintf(name, sizeof name, "%d", index);
    int64_t h = c->hidden, f = c->intermediate;
    tgc_module *layer = bert_child(list, name);
    tgc_module *att = layer ? bert_child(layer, "attention") : NULL;
    tgc_module *self = att ? bert_child(att, "self") : NULL;
    tgc_module *att_out = self ? bert_child(att, "output") : NULL;
    tgc_module *inter = att_out ? bert_child(layer, "intermediate") : NULL;
    tgc_module *out = inter ? bert_child(layer, "output") : NULL;
    return out && bert_linear(self, "query", h, h, rng) && bert_linear(self, "key", h, h, rng) &&
           bert_linear(self, "value", h, h, rng) && bert_linear(att_out, "dense", h, h, rng) &&
           bert_layer_norm(att_out, h, rng) && bert_linear(inter, "dense", f, h, rng) &&
           bert_linear(out, "dense", h, f, rng) && bert_layer_norm(out, h, rng);
}

/* A BERT encoder in eval mode, or NULL. Free it with bert_free. */
static inline tgc_module *bert_create(const bert_config *cfg)
{
    bert_config c = cfg ? *cfg : bert_base_config();
    if (c.hidden < 1 || c.layers < 0 || c.heads < 1 || c.hidden % c.heads != 0 ||
        c.intermediate < 1 || c.vocab < 1 || c.max_pos < 1 || c.type_vocab < 1) {
        fprintf(stderr, "bert_create: bad config (hidden must be a multiple of heads)\n");
        return NULL;
    }
    tgc_module *m = tgc_module_create("BertModel", NULL);
    if (!m)
        return NULL;
    bert_rng rng = {c.seed};
    int ok = tgc_module_set_i64(m, "hidden_size", c.hidden) == TGC_OK &&
             tgc_module_set_i64(m, "num_hidden_layers", c.layers) == TGC_OK &&
             tgc_module_set_i64(m, "num_attention_heads", c.heads) == TGC_OK &&
             tgc_module_set_f64(m, "layer_norm_eps", c.ln_eps) == TGC_OK &&
             tgc_module_set_i64(m, "use_sdpa", c.use_sdpa) == TGC_OK;
    tgc_module *emb = ok ? bert_child(m, "embeddings") : NULL;
    ok = emb && bert_embedding(emb, "word_embeddings", c.vocab, c.hidden, &rng) &&
         bert_embedding(emb, "position_embeddings", c.max_pos, c.hidden, &rng) &&
         bert_embedding(emb, "token_type_embeddings", c.type_vocab, c.hidden, &rng) &&
         bert_layer_norm(emb, c.hidden, &rng);
    tgc_module *enc = ok ? bert_child(m, "encoder") : NULL;
    tgc_module *list = enc ? bert_child(enc, "layer") : NULL;
    ok = list != NULL;
    for (int i = 0; ok && i < c.layers; i++)
        ok = bert_encoder_layer(list, i, &c, &rng);
    if (!ok) {
        tgc_module_free(m);
        return NULL;
    }
    tgc_module_train(m, 0);
    return m;
}

static inline void bert_free(tgc_module *m)
{
    tgc_module_free(m);
}

/* Example inputs in the current scope: token ids from a fixed-seed generator, token types 0
 * for the first half and 1 for the second, positions 0..seq-1, and a mask whose last `pad`
 * positions of every odd batch row are padding. dtype of the ids: TGC_I64 (PyTorch's). */
static inline tgc_status bert_make_inputs(const bert_config *c, int64_t batch, int64_t seq,
                                          int64_t pad, uint64_t seed, tgc_tensor **in)
{
    int64_t n = batch * seq;
    int64_t *ids = malloc((size_t)n * sizeof(int64_t));
    int64_t *types = malloc((size_t)n * sizeof(int64_t));
    int64_t *pos = malloc((size_t)seq * sizeof(int64_t));
    float *mask = malloc((size_t)n * sizeof(float));
    tgc_status st = TGC_ERR_OOM;
    if (ids && types && pos && mask) {
        bert_rng rng = {seed};
        for (int64_t b = 0; b < batch; b++)
            for (int64_t s = 0; s < seq; s++) {
                int64_t i = b * seq + s;
                ids[i] = (int64_t)(bert_rng_uniform(&rng) * c->vocab);
                types[i] = s >= seq / 2 && c->type_vocab > 1;
                mask[i] = (b % 2 == 1 && s >= seq - pad) ? 0.0f : 1.0f;
            }
        for (int64_t s = 0; s < seq; s++)
            pos[s] = s;
        int64_t bs[2] = {batch, seq}, ps[2] = {1, seq};
        size_t nb = (size_t)n * sizeof(int64_t);
        in[0] = tgc_from_data(ids, nb, bs, 2, TGC_I64, tgc_cpu());
        in[1] = tgc_from_data(types, nb, bs, 2, TGC_I64, tgc_cpu());
        in[2] = tgc_from_data(mask, (size_t)n * sizeof(float), bs, 2, TGC_F32, tgc_cpu());
        in[3] = tgc_from_data(pos, (size_t)seq * sizeof(int64_t), ps, 2, TGC_I64, tgc_cpu());
        st = in[0] && in[1] && in[2] && in[3] ? TGC_OK : tgc_last_status();
    }
    free(ids);
    free(types);
    free(pos);
    free(mask);
    return st;
}

/* ---- forward ---- */

/* The hyperparameters the forward pass reads, from the root module's attributes. */
typedef struct bert_hparams {
    int64_t hidden, layers, heads, use_sdpa;
    double ln_eps;
} bert_hparams;

static inline tgc_status bert_read_hparams(const tgc_module *m, bert_hparams *h)
{
    tgc_status st = tgc_module_attr_i64(m, "hidden_size", &h->hidden);
    if (st == TGC_OK)
        st = tgc_module_attr_i64(m, "num_hidden_layers", &h->layers);
    if (st == TGC_OK)
        st = tgc_module_attr_i64(m, "num_attention_heads", &h->heads);
    if (st == TGC_OK)
        st = tgc_module_attr_f64(m, "layer_norm_eps", &h->ln_eps);
    if (st == TGC_OK)
        st = tgc_module_attr_i64(m, "use_sdpa", &h->use_sdpa);
    return st;
}

static inline tgc_tensor *bert_linear_fwd(tgc_module *parent, const char *name, tgc_tensor *x)
{
    tgc_module *l = tgc_module_get_child(parent, name);
    return tgc_linear(x, tgc_module_get(l, "weight"), tgc_module_get(l, "bias"));
}

static inline tgc_tensor *bert_layer_norm_fwd(tgc_module *parent, tgc_tensor *x, double eps)
{
    tgc_module *l = tgc_module_get_child(parent, "LayerNorm");
    return tgc_layer_norm(x, 1, tgc_module_get(l, "weight"), tgc_module_get(l, "bias"), eps);
}

/* [B, S, heads * d] -> [B, heads, S, d]. The 0s copy B and S, so S stays symbolic. */
static inline tgc_tensor *bert_split_heads(tgc_tensor *x, int heads, int d)
{
    int64_t shape[4] = {0, 0, heads, d};
    int perm[4] = {0, 2, 1, 3};
    return tgc_permute(tgc_reshape(x, shape, 4), perm, 4);
}

/* Self-attention of one layer; ext_mask is the additive mask [B, 1, 1, S]. */
static inline tgc_tensor *bert_attention_fwd(tgc_module *att, tgc_tensor *x, tgc_tensor *ext_mask,
                                             const bert_hparams *c)
{
    tgc_module *self = tgc_module_get_child(att, "self");
    int heads = (int)c->heads, d = (int)(c->hidden / c->heads);
    tgc_tensor *q = bert_split_heads(bert_linear_fwd(self, "query", x), heads, d);
    tgc_tensor *k = bert_split_heads(bert_linear_fwd(self, "key", x), heads, d);
    tgc_tensor *v = bert_split_heads(bert_linear_fwd(self, "value", x), heads, d);
    tgc_tensor *ctx;
    if (c->use_sdpa) {
        ctx = tgc_scaled_dot_product_attention(q, k, v, ext_mask, 0.0, 0, 0.0);
    } else {
        tgc_tensor *scores = tgc_matmul(q, tgc_transpose(k, -1, -2)); /* [B, H, S, S] */
        scores = tgc_add(tgc_mul_scalar(scores, 1.0 / sqrt((double)d)), ext_mask);
        ctx = tgc_matmul(tgc_softmax(scores, -1), v); /* [B, H, S, d] */
    }
    int perm[4] = {0, 2, 1, 3};
    int64_t merged[3] = {0, 0, -1};
    ctx = tgc_reshape(tgc_permute(ctx, perm, 4), merged, 3); /* [B, S, hidden] */
    tgc_module *out = tgc_module_get_child(att, "output");
    return bert_layer_norm_fwd(out, tgc_add(bert_linear_fwd(out, "dense", ctx), x), c->ln_eps);
}

static inline tgc_tensor *bert_layer_fwd(tgc_module *layer, tgc_tensor *x, tgc_tensor *ext_mask,
                                         const bert_hparams *c)
{
    x = bert_attention_fwd(tgc_module_get_child(layer, "attention"), x, ext_mask, c);
    tgc_tensor *h =
        tgc_gelu(bert_linear_fwd(tgc_module_get_child(layer, "intermediate"), "dense", x));
    tgc_module *out = tgc_module_get_child(layer, "output");
    return bert_layer_norm_fwd(out, tgc_add(bert_linear_fwd(out, "dense", h), x), c->ln_eps);
}

/* in: input_ids, token_type_ids, attention_mask[, position_ids] (see the top of this file);
 * out[0]: the last hidden state, f32 [B, S, hidden]. */
static inline tgc_status bert_forward(tgc_module *self, tgc_tensor *const *in, int n_in,
                                      tgc_tensor **out, int n_out)
{
    if (n_in < 3 || n_out < 1)
        return TGC_ERR_INVALID_ARG;
    bert_hparams hp;
    tgc_status st = bert_read_hparams(self, &hp);
    if (st != TGC_OK)
        return st;
    const bert_hparams *c = &hp;
    /* position_ids, or 0..S-1 made here as [1, S] with S left symbolic */
    tgc_tensor *pos = n_in > 3 ? in[3] : NULL;
    if (!pos)
        pos = tgc_unsqueeze(
            tgc_arange_sym(0, tgc_sym_size(in[0], 1), 1, TGC_I64, tgc_device_of(in[0])), 0);
    tgc_module *emb = tgc_module_get_child(self, "embeddings");
#define BERT_EMB(name) tgc_module_get(tgc_module_get_child(emb, name), "weight")
    tgc_tensor *x = tgc_add(tgc_add(tgc_embedding(BERT_EMB("word_embeddings"), in[0]),
                                    tgc_embedding(BERT_EMB("position_embeddings"), pos)),
                            tgc_embedding(BERT_EMB("token_type_embeddings"), in[1]));
#undef BERT_EMB
    x = bert_layer_norm_fwd(emb, x, c->ln_eps);

    /* [B, S] 0/1 -> additive [B, 1, 1, S]: 0 where attended, -10000 at padding. */
    tgc_tensor *m = tgc_cast(in[2], TGC_F32);
    m = tgc_mul_scalar(tgc_sub_scalar(m, 1.0), 10000.0);
    m = tgc_unsqueeze(tgc_unsqueeze(m, 1), 1);

    tgc_module *list = tgc_module_get_child(tgc_module_get_child(self, "encoder"), "layer");
    for (int i = 0; i < c->layers; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d", i);
        x = bert_layer_fwd(tgc_module_get_child(list, name), x, m, c);
    }
    out[0] = x;
    return out[0] ? TGC_OK : tgc_last_status();
}

#endif
