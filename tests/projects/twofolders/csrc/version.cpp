extern "C" const char* twofolders_version() { return "1.0.0"; }
