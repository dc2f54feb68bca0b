/* examples/mlp.c (placeholder until the runtime/CLI work lands). */
int main(void) { return 0; }
