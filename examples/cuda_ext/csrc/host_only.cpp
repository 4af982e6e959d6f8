// Host code: compiled into the extension, never into device code.
int demo_version() { return 1; }

// For Python (cuda_ext.version, through ctypes).
extern "C" int cuda_ext_version() { return demo_version(); }
