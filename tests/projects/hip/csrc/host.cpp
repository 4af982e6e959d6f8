int hk_version() { return 1; }
