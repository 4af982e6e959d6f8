#include "ops.h"

int version() { return 3; }

extern "C" int ops_version() { return version(); }
