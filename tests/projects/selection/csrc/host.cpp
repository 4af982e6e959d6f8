#include "host.h"
int host_helper(int x) { return x + 1; }
