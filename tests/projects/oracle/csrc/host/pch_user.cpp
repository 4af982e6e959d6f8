int pch_entry() { return pch_value(); }
