#include "plain.h"
float plain_host_step() { return plain_step(); }
