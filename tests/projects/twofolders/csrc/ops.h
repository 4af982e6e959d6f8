#pragma once

// As TORCH_CHECK does: the file and line of a failed check, passed to a function that throws them.
[[noreturn]] void ops_fail(const char* file, int line, const char* what);
#define OPS_CHECK(cond, what) \
  do {                        \
    if (!(cond)) ops_fail(__FILE__, __LINE__, what); \
  } while (0)

void launch_checked(int* x);
void launch_plain(int* x);
void launch_message(int* x);
void launch_hidden(int* x);
void launch_applied(int* x);
void launch_biased(int* x);
int registry_size();
