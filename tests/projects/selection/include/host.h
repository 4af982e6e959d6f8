#pragma once
int host_helper(int x);
