// Host code in a static library: it runs wherever launchers does.
int clamp_count(int n) { return n < 1024 ? n : 1024; }
