void c_fn(void);
void d_fn(void)
{
    c_fn();
}
