void arc_launch(int* x);
void arc_a_entry(int* x) { arc_launch(x); }
