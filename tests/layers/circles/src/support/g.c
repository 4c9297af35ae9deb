void g_fn(void)
{
}
