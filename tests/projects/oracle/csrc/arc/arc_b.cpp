void arc_launch(int* x);
void arc_b_entry(int* x) { arc_launch(x); }
