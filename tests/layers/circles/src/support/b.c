void k_fn(void);
void b_fn(void)
{
    k_fn();
}
