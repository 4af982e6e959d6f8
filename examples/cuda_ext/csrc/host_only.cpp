// Host code: compiled into the extension, never into device code.
int demo_version() { return 1; }
