int hc_version() { return 2; }
