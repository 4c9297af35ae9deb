void a_fn(void);
void g_fn(void);
void k_fn(void)
{
    a_fn();
    g_fn();
}
