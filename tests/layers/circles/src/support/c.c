void d_fn(void);
void c_fn(void)
{
    d_fn();
}
