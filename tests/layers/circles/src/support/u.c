void u_fn(void)
{
}
