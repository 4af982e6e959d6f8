#include "shared_host.h"
int host_entry() { return shared_host_value(); }
