void f_fn(void)
{
}
