/* The minic command. (Placeholder until the runtime/CLI work lands.) */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "minic: error: not built yet\n");
    return 2;
}
