void b_fn(void);
void a_fn(void)
{
    b_fn();
}
