void f_fn(void);
void e_fn(void)
{
    f_fn();
}
